package vbmcd

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Limits of the Redfish listener. Redfish requests are small JSON bodies
// (the service reads at most 1 MiB of one) and short headers; a client that
// sends them slower than this, or keeps an idle connection longer, is
// holding a connection it does not use.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second // headers and body
	writeTimeout      = 60 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 32 << 10
)

// newHTTPServer is the Redfish listener's server with the limits above.
func newHTTPServer(h http.Handler, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
}
