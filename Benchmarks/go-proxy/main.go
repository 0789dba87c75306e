// The proxy benchmark's second anchor: what a user would write instead of the daemon's proxy for
// this job, net/http/httputil.ReverseProxy with a director that sets the token cookie, listening
// on a Unix socket, keep-alive upstream connections as many as the load needs.
//
//	go-proxy SOCKET_PATH UPSTREAM_URL TOKEN
package main

import (
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: go-proxy SOCKET_PATH UPSTREAM_URL TOKEN")
	}
	upstream, err := url.Parse(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	token := os.Args[3]
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	direct := proxy.Director
	proxy.Director = func(request *http.Request) {
		direct(request)
		request.Header.Set("Cookie", "aws-waf-token="+token)
	}
	// The default transport keeps 2 idle connections per host: with 16 or 64 clients it would
	// open and close connections all the time, which no one tuning this would leave.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = 1024
	transport.MaxIdleConnsPerHost = 1024
	proxy.Transport = transport
	os.Remove(os.Args[1])
	listener, err := net.Listen("unix", os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout.WriteString("ready\n")
	log.Fatal(http.Serve(listener, proxy))
}
