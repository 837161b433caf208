package netcmd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labctl"
)

// TestFlagsCheckedFirst: what the flags get wrong is said before any host
// is reached (no libvirt answers at this URI, no namespace is opened).
func TestFlagsCheckedFirst(t *testing.T) {
	none := []string{"--libvirt-uri", "qemu+tcp://127.0.0.1:1/system", "--dir", t.TempDir()}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"net", "check", "-o", "yaml"}, `--output "yaml": use table or json`},
		{[]string{"net", "repair", "--host", "beta"}, `--host "beta": lab "seed" is on one host (its lab file has no hosts:)`},
		{[]string{"net", "down", "--mode", "agentx"}, `--mode "agentx"`},
		{[]string{"net", "chek"}, `unknown command "chek" for "labctl net"; the commands are check, repair and down`},
	} {
		var out bytes.Buffer
		err := labctl.Run(context.Background(), zap.NewNop(), labctl.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, append(tt.args, none...))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("labctl %s = %v\n%s\nwant an error containing %q", strings.Join(tt.args, " "), err, out.String(), tt.want)
		}
	}
}
