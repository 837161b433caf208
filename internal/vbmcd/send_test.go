package vbmcd

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// testClient talks to the tests' daemons: it accepts their self-signed
// certificates and gives up on a daemon that does not answer.
var testClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test daemons' own certificates
}}

// reply is a daemon's answer.
type reply struct {
	Code   int
	Header http.Header
	Body   []byte
}

// object decodes the body as a JSON object (nil when it is none, as for a
// 204).
func (r reply) object() map[string]any {
	var v map[string]any
	_ = json.Unmarshal(r.Body, &v)
	return v
}

// send makes one request to url as user (Basic auth; none when user is ""),
// with a JSON body when body is not "", and extra headers given as name,
// value pairs (a pair with an empty value is left out).
func send(method, url, user, pass, body string, header ...string) (reply, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := testClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}, err
}

// lanplus is ipmitool's arguments for the test BMC on 127.0.0.1:port, as
// admin with pass, followed by args.
func lanplus(port int, pass string, args ...string) []string {
	return append([]string{"-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "admin", "-P", pass}, args...)
}
