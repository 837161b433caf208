package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/bmlab/bmlab/internal/plan"
)

// redfishClient is labctl's side of a node's BMC: the few Redfish calls an
// installer makes (virtual media, boot override, power), sent to vbmcd
// from the lab's network namespace as the installer would send them.
type redfishClient struct {
	hc         *http.Client
	user, pass string
}

func newRedfishClient(p *plan.Plan) *redfishClient {
	return &redfishClient{hc: BMCClient(p), user: p.BMC.Username, pass: p.BMC.Password}
}

// do sends one request; out (may be nil) receives a JSON answer. An answer
// other than 2xx is an error with the BMC's message.
func (c *redfishClient) do(ctx context.Context, method, url string, body, out any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.pass)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, redfishMessage(data))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp, fmt.Errorf("%s %s: %w", method, url, err)
		}
	}
	return resp, nil
}

// redfishMessage is the first message of a Redfish error body.
func redfishMessage(body []byte) string {
	var e struct {
		Error struct {
			Message  string `json:"message"`
			Extended []struct {
				Message string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		if len(e.Error.Extended) > 0 {
			return e.Error.Extended[0].Message
		}
		if e.Error.Message != "" {
			return e.Error.Message
		}
	}
	return strings.TrimSpace(string(body))
}

// virtualMedia is what labctl reads of a VirtualMedia member.
type virtualMedia struct {
	ID         string   `json:"@odata.id"`
	MediaTypes []string `json:"MediaTypes"`
	Image      string   `json:"Image"`
	Inserted   bool     `json:"Inserted"`
}

// cdDrive finds the system's virtual CD (the member whose media types
// include CD or DVD).
func (c *redfishClient) cdDrive(ctx context.Context, systemURL string) (string, virtualMedia, error) {
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		} `json:"Members"`
	}
	if _, err := c.do(ctx, http.MethodGet, systemURL+"/VirtualMedia", nil, &coll); err != nil {
		return "", virtualMedia{}, err
	}
	root := systemURL[:strings.Index(systemURL, "/redfish/")]
	for _, m := range coll.Members {
		var vm virtualMedia
		if _, err := c.do(ctx, http.MethodGet, root+m.ID, nil, &vm); err != nil {
			return "", vm, err
		}
		for _, t := range vm.MediaTypes {
			if t == "CD" || t == "DVD" {
				return root + m.ID, vm, nil
			}
		}
	}
	return "", virtualMedia{}, fmt.Errorf("%s has no virtual CD", systemURL)
}

// system is what labctl reads of a ComputerSystem.
type system struct {
	PowerState string `json:"PowerState"`
	Boot       struct {
		Target  string `json:"BootSourceOverrideTarget"`
		Enabled string `json:"BootSourceOverrideEnabled"`
	} `json:"Boot"`
}

func (c *redfishClient) system(ctx context.Context, url string) (system, error) {
	var s system
	_, err := c.do(ctx, http.MethodGet, url, nil, &s)
	return s, err
}
