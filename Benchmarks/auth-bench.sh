#!/usr/bin/env bash
# Forward authentication per request: nginx with auth_request to the daemon's GET /v1/auth (as
# deploy/nginx/waf-tokend.conf, with a keep-alive upstream for the socket) beside the same nginx
# with a fixed Cookie header carrying the same token, both in front of a second nginx answering
# `return 200`; then /v1/auth alone beside /v1/token on the socket. h2load (HTTP/1.1, keep-alive,
# 16 connections), each figure the median of RUNS runs, the two alternating; one worker each.
# Goals: auth_request ≥ 0.7× the fixed cookie, /v1/auth ≥ 0.9× /v1/token. The same auth_request
# answered by nginx itself (`return 200` with the same headers) shows what nginx's subrequest
# costs whoever answers it.
#
#   Benchmarks/auth-bench.sh        (RUNS=3 REQUESTS=100000 CONNECTIONS=16)
set -euo pipefail
cd "$(dirname "$0")/.."
source Benchmarks/lib.sh

RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-100000}
CONNECTIONS=${CONNECTIONS:-16}
bench_setup auth
command -v nginx >/dev/null || { echo "error: nginx is missing (scripts/install-deps.sh bench installs it)" >&2; exit 1; }

build_release waf-tokend waf-token-service
start_service
start_daemon "$work/token.sock" --state-directory "$work"
token=$(curl -sf --unix-socket "$work/token.sock" -H "Accept: text/plain" http://localhost/v1/token)

nginx_on_port upstream 1 "    server {
        listen 127.0.0.1:@PORT@;
        location / { return 200 \"ok\\n\"; }
        location = /auth { add_header X-Aws-Waf-Token $token; add_header Cookie \"aws-waf-token=$token\"; return 200; }
    }"
# auth_server SOCKET AUTH_PASS [LINE]: a server that lets each request through auth_request to
# AUTH_PASS and forwards it with the cookie the answer sets (as deploy/nginx/waf-tokend.conf).
auth_server() {
    echo "    server {
        listen unix:$work/$1.sock;
        location / {
            auth_request /.waf-token;
            auth_request_set \$waf_cookie \$upstream_http_cookie;
            proxy_set_header Cookie \$waf_cookie;
            proxy_pass http://api;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
        location = /.waf-token {
            internal;
            proxy_pass $2;
            proxy_pass_request_body off;
            proxy_set_header Content-Length \"\";${3:+
            $3}
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }"
}
nginx_config front 1 "    upstream api { server 127.0.0.1:$port; keepalive 128; }
    upstream waf_tokend { server unix:$work/token.sock; keepalive 32; }
$(auth_server auth http://waf_tokend/v1/auth 'proxy_set_header X-Original-URI $request_uri;')
    # The ceiling: auth_request to a location nginx answers itself, with the same headers.
$(auth_server ceiling http://api/auth)
    server {
        listen unix:$work/fixed.sock;
        location / {
            proxy_set_header Cookie \"aws-waf-token=$token\";
            proxy_pass http://api;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }"
for socket in auth fixed ceiling; do wait_for "curl -sf --unix-socket $work/$socket.sock http://localhost/x"; done

# alternate NAME=SOCKET:PATH NAME=SOCKET:PATH [h2load options]: prints both medians and the ratio.
alternate() {
    local first=$1 second=$2
    shift 2
    declare -A rows=()
    for side in "$first" "$second"; do
        local target=${side#*=}
        h2load_run "${target%%:*}" "$CONNECTIONS" 20000 "${target#*:}" "$@" >/dev/null   # warm-up
    done
    for ((run = 0; run < RUNS; run++)); do
        for side in "$first" "$second"; do
            local target=${side#*=}
            rows[${side%%=*}]+="$(h2load_run "${target%%:*}" "$CONNECTIONS" "$REQUESTS" "${target#*:}" "$@")"$'\n'
        done
    done
    median() { median_row $(printf '%s' "${rows[$1]}" | tr ' ' '_') | tr '_' ' '; }
    read -r rate _ p99 <<<"$(median "${first%%=*}")"
    read -r arate _ ap99 <<<"$(median "${second%%=*}")"
    # Every run of the anchor, for its spread.
    spread=$(printf '%s' "${rows[${second%%=*}]}" | awk '{print $1}' | sort -n | paste -sd/)
    printf "%-34s %10s req/s (p99 %s ms)   %-22s %10s req/s (p99 %s ms, runs %s)   %.2fx\n" "${first%%=*}" "$rate" "$p99" \
        "${second%%=*}" "$arate" "$ap99" "$spread" "$(awk -v a="$rate" -v b="$arate" 'BEGIN {print a / b}')"
}

echo "h2load --h1 -t 1 -c $CONNECTIONS -n $REQUESTS, median of $RUNS alternating runs, $(nproc) cores; nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') worker_processes 1, waf-tokend socket.threads 1"
alternate "nginx auth_request → /v1/auth=$work/auth.sock:/x" "nginx fixed Cookie=$work/fixed.sock:/x"
echo "    goal: ≥ 0.70x"
alternate "nginx auth_request → nginx itself=$work/ceiling.sock:/x" "nginx fixed Cookie=$work/fixed.sock:/x"
echo "    (the ceiling: the same auth_request answered by the fastest server there is, nginx's return)"
alternate "/v1/auth=$work/token.sock:/v1/auth" "/v1/token=$work/token.sock:/v1/token" -H "X-Original-URI: /x"
echo "    goal: ≥ 0.90x"
