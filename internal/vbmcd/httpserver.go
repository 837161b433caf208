package vbmcd

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// httpLimits bound what one client of the Redfish listener may hold:
// Redfish requests are small JSON bodies (the service reads at most 1 MiB of
// one) and short headers; a client that sends them slower than this, or
// keeps an idle connection longer, is holding a connection it does not use.
type httpLimits struct {
	readHeader time.Duration // request line and headers
	read       time.Duration // headers and body
	write      time.Duration // from the end of the headers to the end of the response
	idle       time.Duration // between requests on a kept-alive connection
	maxHeader  int           // bytes of request line and headers
}

var defaultHTTPLimits = httpLimits{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      60 * time.Second,
	idle:       60 * time.Second,
	maxHeader:  32 << 10,
}

// newHTTPServer is the Redfish listener's server with limits l.
func newHTTPServer(h http.Handler, log *zap.Logger, l httpLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeader,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
}
