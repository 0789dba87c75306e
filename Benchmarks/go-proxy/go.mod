module wafbench/goproxy

go 1.19
