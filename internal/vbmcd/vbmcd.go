package vbmcd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/metrics"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bmlab/bmlab/internal/ipmi"
	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/listen"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/qemuaccess"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/simnotify"
	"github.com/bmlab/bmlab/internal/vbmcd/ipmicmd"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/webui"
)

// Streams are the command's standard streams.
type Streams struct {
	Out, ErrOut io.Writer
}

// Run runs vbmcd with args (without the program name) until ctx ends.
func Run(ctx context.Context, streams Streams, args []string) error {
	cmd := NewCommand(streams, os.Getenv)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// NewCommand returns the root command; getenv supplies VBMCD_* variables.
func NewCommand(streams Streams, getenv func(string) string) *cobra.Command {
	var cfg Config
	var configFile string
	cmd := &cobra.Command{
		Use:   "vbmcd",
		Short: "vbmcd gives every libvirt VM a Redfish and an IPMI lanplus BMC",
		Long: `vbmcd serves a BMC for every libvirt domain, KubeVirt VirtualMachine or
simulated server: Redfish (sessions, boot override, virtual media, secure
boot, BIOS, accounts, events, firmware) on one listener, each machine at
/redfish/v1/Systems/<uuid>, and IPMI 2.0 lanplus (boot options, SOL) on a UDP
port per machine. With --bmc-addresses each machine also gets a BMC of its
own address (Redfish on 443, IPMI on 623), as a server's BMC has. Both faces
share one machine model, so a change made through one is what the other
reports; a machine may look like a vendor's BMC (vbmcd personality).

Every flag can also be set in the YAML file given by --config (keys are the
flags' names) or as an environment variable VBMCD_<FLAG> (for example
VBMCD_REDFISH_ADDR). Flags win over the environment, which wins over the file.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := fill(cmd.Flags(), configFile, getenv); err != nil {
				return err
			}
			if err := cfg.validate(); err != nil {
				return err
			}
			log, err := newLogger(cfg, streams.ErrOut)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			return serve(cmd.Context(), cfg, log, streams.Out, cmd.Flags().Changed("password"))
		},
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	pf := cmd.PersistentFlags()
	cfg.bind(pf)
	pf.StringVar(&configFile, "config", getenv("VBMCD_CONFIG"), "YAML config file (keys are the flags' names)")

	open := func(ctx context.Context) (*machine.Service, func(), error) {
		if err := fill(cmd.PersistentFlags(), configFile, getenv); err != nil {
			return nil, nil, err
		}
		if cfg.Backend != "libvirt" {
			return nil, nil, fmt.Errorf("the sim backend keeps its machines inside the running daemon; use --ipmi-port-base with it, or --backend libvirt")
		}
		ctx, cancel := context.WithCancel(ctx)
		be, err := newLibvirt(ctx, cfg, zap.NewNop())
		if err != nil {
			cancel()
			return nil, nil, err
		}
		return machine.NewService(be, zap.NewNop()), cancel, nil
	}
	cmd.AddCommand(ipmicmd.NewCommand(open, streams.Out, func() int {
		if len(cfg.BMCAddresses) == 0 {
			return 0
		}
		return cfg.BMCIPMIPort
	}))
	cmd.AddCommand(newLLDPCommand(open, streams.ErrOut))
	cmd.AddCommand(newSushyCommand(streams, getenv))
	stateDir := func() (string, error) {
		if err := fill(cmd.PersistentFlags(), configFile, getenv); err != nil {
			return "", err
		}
		return cfg.StateDir, nil
	}
	cmd.AddCommand(newFaultCommand(stateDir, streams.Out))
	cmd.AddCommand(newPersonalityCommand(stateDir, streams.Out))
	return cmd
}

func newLogger(cfg Config, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", cfg.LogLevel)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch cfg.LogFormat {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: use console or json", cfg.LogFormat)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl)), nil
}

func newLibvirt(ctx context.Context, cfg Config, log *zap.Logger) (*virt.Hosts, error) {
	hosts, err := cfg.libvirtHosts()
	if err != nil {
		return nil, err
	}
	// A 1 s keepalive: a host that vanishes without closing the connection
	// (power loss, a cut network) makes its machines unavailable within
	// about 2 s rather than serve what they were.
	be, err := virt.NewHosts(hosts, virt.Config{Keepalive: time.Second, VarsDir: filepath.Join(cfg.StateDir, "ovmf"), KCSDir: cfg.inbandDir()}, log)
	if err != nil {
		return nil, err
	}
	if err := be.Connect(ctx, 20*time.Second); err != nil {
		return nil, err
	}
	return be, nil
}

// newKubeVirt connects to the cluster and waits until every chosen
// VirtualMachine is listed.
func newKubeVirt(ctx context.Context, cfg Config, log *zap.Logger) (*kubevirt.Backend, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q: %w", cfg.Kubeconfig, err)
	}
	images, err := kubeMediaServer(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	be, err := kubevirt.New(kubevirt.Config{Rest: rc, Namespaces: cfg.KubeNamespaces, Selector: cfg.KubeSelector, Images: images}, log)
	if err != nil {
		return nil, err
	}
	if err := be.Run(ctx, time.Minute); err != nil {
		return nil, err
	}
	return be, nil
}

// kubeMediaServer starts the plain-HTTP server CDI's importer fetches
// inserted images from (--kubevirt-media-addr); nil when not asked for.
// It serves only images attached right now, each at an unguessable path.
func kubeMediaServer(ctx context.Context, cfg Config, log *zap.Logger) (*kubevirt.ImageServer, error) {
	if cfg.KubeMediaAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.KubeMediaAddr)
	if err != nil {
		return nil, fmt.Errorf("--kubevirt-media-addr: %w (choose another address)", err)
	}
	base := cfg.KubeMediaURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	images := kubevirt.NewImageServer(base)
	srv := &http.Server{Handler: images, ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(log)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("image server for CDI stopped", zap.Error(err))
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Info("serving inserted images to CDI", zap.String("addr", ln.Addr().String()), zap.String("url", base))
	return images, nil
}

// serve runs the daemon until ctx ends.
// passwordFlag says --password was given on the command line.
func serve(ctx context.Context, cfg Config, log *zap.Logger, out io.Writer, passwordFlag bool) error {
	user, pass, err := cfg.credentials()
	if err != nil {
		return err
	}
	// The users of --htpasswd-file replace the built-in password: the
	// daemon's own user is served only when its password is yours.
	var file *accounts.Htpasswd
	if cfg.HtpasswdFile != "" {
		if file, err = accounts.LoadHtpasswd(cfg.HtpasswdFile); err != nil {
			return err
		}
	}
	daemonUser := file == nil || pass != DefaultPassword
	if daemonUser {
		if err := cfg.checkPassword(pass); err != nil {
			return err
		}
	}
	for _, w := range cfg.warnings(passwordFlag && cfg.CredentialsFile == "", daemonUser && pass == DefaultPassword) {
		log.Warn(w)
	}
	var be machine.Backend
	var notifier *simnotify.Notifier
	switch cfg.Backend {
	case "sim":
		sb, n, err := newSim(ctx, cfg, log.Named("sim"))
		if err != nil {
			return err
		}
		be, notifier = sb, n
	case "kubevirt":
		kb, err := newKubeVirt(ctx, cfg, log.Named("kubevirt"))
		if err != nil {
			return err
		}
		be = kb
	default:
		lb, err := newLibvirt(ctx, cfg, log.Named("libvirt"))
		if err != nil {
			return err
		}
		be = lb
	}
	policy, err := cfg.mediaPolicy()
	if err != nil {
		return err
	}
	if cfg.MediaInsecureTLS {
		log.Warn("--media-insecure-tls: image servers' certificates are never verified; anyone on the path can replace the images machines boot")
	}
	cache, err := media.New(media.Config{
		Dir: cfg.MediaDir, MaxBytes: cfg.MediaMaxBytes, LocalDir: cfg.MediaLocalDir, Group: cfg.MediaGroup,
		Policy: policy, CAFile: cfg.MediaCAFile, InsecureTLS: cfg.MediaInsecureTLS, Log: log.Named("media"),
	})
	if err != nil {
		return fmt.Errorf("virtual media cache: %w (choose another --media-dir)", err)
	}
	if cfg.Backend == "libvirt" {
		if err := qemuReaches(cache.Dir(), log); err != nil {
			return err
		}
	}
	reg := metrics.New()
	keepGCHeadroom(ctx, gcHeadroom)
	var fetcher machine.ImageFetcher = cache
	if sb, ok := be.(*sim.Backend); ok {
		fetcher = cache.ProbeFor(sb.Probes) // --sim-media probe
	}
	// A machine's own BMC (--bmc-addresses, below) fetches its images from
	// its address, so it reaches only what that network routes to.
	var own *listen.BMCs
	svc := machine.NewService(be, log.Named("machine"), machine.WithImageFetcher(fetcher), machine.WithMediaWait(cfg.MediaWait),
		machine.WithMediaSource(func(id string) netip.Addr { return own.AddrOf(id) }),
		machine.WithBMCUpdateDowntime(cfg.BMCUpdateDowntime),
		machine.WithBMCFlashTime(cfg.BMCFlashTime),
		machine.WithPowerObserver(func(rt machine.ResetType, err error, took time.Duration) {
			reg.Power(string(rt), outcome(err), took)
		}),
		machine.WithStartPacing(cfg.MaxStarting, cfg.StartGap))
	reg.Gauge("vbmcd_power_actions_pending", "Power actions accepted and not yet done (queued starts included).",
		func() float64 { return float64(svc.PowerQueue().Pending) })
	reg.Gauge("vbmcd_power_starts_queued", "Starts waiting for a slot (--max-starting) or the gap (--start-gap).",
		func() float64 { return float64(svc.PowerQueue().Queued) })
	registerSources(reg, be, cache)
	registerNotifier(reg, notifier)
	svc.Watch(ctx)
	if err := applyFaults(svc, cfg.Faults); err != nil {
		return err
	}

	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w (choose another with --state-dir)", err)
	}
	reserved := []string{user}
	if file != nil {
		reserved = append(reserved, file.Names()...)
	}
	store, err := accounts.Open(cfg.StateDir, accounts.WithReserved(reserved...))
	if err != nil {
		return err
	}
	uuid, err := serviceUUID(cfg.StateDir)
	if err != nil {
		return err
	}
	// One login budget per source for both faces: a guesser cannot double
	// its rate by switching protocol.
	throttle := accounts.NewThrottle(loginBurst, loginEvery)
	quirkTimes, _ := redfish.ParseQuirkTimes(cfg.QuirkTimes) // checked by validate
	// The web console's graphical consoles, which the Managers announce.
	kvm := 0
	if _, ok := svc.Backend().(machine.DisplayOpener); ok && cfg.WebConsole {
		kvm = webui.MaxConsoles
	}
	// The host networks the BMCs' addresses are on, as both faces report
	// them (the Manager's EthernetInterface, IPMI's LAN parameters).
	hn := newHostNet(5 * time.Second)
	rfOpts := []redfish.Option{
		redfish.WithBMCNIC(cfg.ipmiAddr(), hn.lookup),
		redfish.WithGraphicalConsole(kvm),
		redfish.WithThrottle(throttle),
		redfish.WithMetrics(reg),
		redfish.WithAccounts(store),
		redfish.WithSessionTimeout(cfg.SessionTimeout),
		redfish.WithServiceUUID(uuid),
		redfish.WithPersonality(cfg.Personality, cfg.Quirks),
		redfish.WithQuirkTimes(quirkTimes),
		// The image fetcher's, but loopback by --events-allow-loopback only.
		redfish.WithEventPolicy(policy.Events(cfg.EventsAllowLoopback)),
		redfish.WithEventStore(filepath.Join(cfg.StateDir, "event-subscriptions.json")),
	}
	if daemonUser {
		rfOpts = append(rfOpts, redfish.WithCredentials(user, pass))
	}
	if file != nil {
		rfOpts = append(rfOpts, redfish.WithHtpasswd(file))
		log.Info("Redfish users from the htpasswd file", zap.String("file", cfg.HtpasswdFile), zap.Int("users", len(file.Names())),
			zap.Bool("daemon user too", daemonUser))
	}
	rf := redfish.New(svc, log.Named("redfish"), rfOpts...)

	rf.WatchEvents(ctx)
	var handler http.Handler = rf.Handler()
	var ui *webui.UI
	if cfg.WebConsole {
		ui = webui.New(rf, svc, log.Named("webui"))
		ui.Run(ctx)
		handler = ui.Wrap(handler)
	}
	var tc *tls.Config
	scheme := "https"
	if cfg.InsecureHTTP {
		scheme = "http"
	} else {
		sans := cfg.TLSSANs
		if host, _, err := net.SplitHostPort(cfg.RedfishAddr); err == nil && reach(host) != reachLocal && !unspecified(host) {
			sans = append([]string{host}, sans...)
		}
		if tc, err = redfish.TLSConfig(cfg.StateDir, cfg.TLSCert, cfg.TLSKey, sans...); err != nil {
			return err
		}
		if err := redfish.ApplyTLSPolicy(tc, cfg.TLSMinVersion, cfg.TLSCipherSuites); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.RedfishAddr)
	if err != nil {
		return fmt.Errorf("redfish listener: %w (is another vbmcd or sushy-emulator running? choose another --redfish-addr)", err)
	}
	// Every Redfish listener is built from one front, and shares its
	// budgets.
	fr := listen.NewFront(ctx, listen.Conns{PerSource: cfg.MaxConnsPerSource, Total: cfg.MaxConns}, log.Named("redfish"), redfish.Busy, reg)
	srv := fr.Server(handler, tc)
	if ui != nil {
		srv.RegisterOnShutdown(ui.Shutdown)
	}

	// Machines' own BMCs (--bmc-addresses): more listeners of the same
	// server, served by the same front (its limits and budgets hold on
	// them too, together with the service's listener).
	if pool := cfg.bmcPool(); pool != nil {
		var ca *pki.CA
		if srv.TLSConfig != nil {
			if ca, err = cfg.bmcCA(); err != nil {
				return err
			}
		}
		serveOn := func(s *http.Server, l net.Listener) error { return fr.Serve(s, l, tc != nil) }
		own = listen.NewBMCs(svc, pool, srv, serveOn, cfg.bmcRedfishPort(), ca, log.Named("bmcs"))
		if err := own.Start(ctx); err != nil {
			return err
		}
		reg.Gauge("vbmcd_bmc_listeners", "Machines' own Redfish listeners running (--bmc-addresses).", func() float64 { return float64(own.Listening()) })
	}

	errc := make(chan error, 2)
	go func() {
		if err := fr.Serve(srv, ln, tc != nil); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("redfish server: %w", err)
		}
	}()
	if own != nil {
		go own.Run(ctx)
	}
	var ipmiDone chan struct{}
	if cfg.IPMI {
		opts := []ipmi.Option{
			ipmi.WithAccounts(store),
			ipmi.WithThrottle(throttle),
			ipmi.WithMetrics(reg),
			ipmi.WithAddress(cfg.ipmiAddr()),
			ipmi.WithCipherSuite0(cfg.IPMICipher0),
			ipmi.WithSessionLimit(cfg.IPMIMaxSessions),
			ipmi.WithSessionTimeout(cfg.IPMISessionTimeout),
		}
		if daemonUser {
			opts = append(opts, ipmi.WithCredentials(machine.Credential{Username: user, Password: pass}))
		}
		if cfg.IPMIPortBase > 0 {
			opts = append(opts, ipmi.WithPortBase(cfg.IPMIPortBase))
		}
		if own != nil {
			opts = append(opts, ipmi.WithBMCPort(cfg.BMCIPMIPort))
		}
		opts = append(opts, inbandOptions(cfg, hn, log)...)
		mgr := ipmi.NewManager(svc, log.Named("ipmi"), opts...)
		reg.Gauge("vbmcd_ipmi_sessions", "IPMI sessions of every BMC, set-up ones included.", func() float64 { return float64(mgr.Sessions()) })
		ipmiDone = make(chan struct{})
		go func() {
			defer close(ipmiDone)
			if err := mgr.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("ipmi: %w", err)
			}
		}()
	}

	// The admin socket (vbmcd fault) is a testing aid: without it the
	// daemon still serves.
	asrv := &http.Server{Handler: adminHandler(svc), ReadHeaderTimeout: 10 * time.Second}
	if aln, asock, err := listenAdmin(cfg.StateDir); err != nil {
		log.Warn("no admin socket: vbmcd fault will not reach this daemon", zap.Error(err))
	} else {
		go func() { _ = asrv.Serve(aln) }()
		defer os.Remove(asock)
	}

	var msrv *http.Server
	metricsURL := "none"
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w (choose another --metrics-addr, or \"\" for none)", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", reg.Handler())
		msrv = listen.NewServer(mux, log, listen.DefaultLimits)
		go func() {
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
		metricsURL = "http://" + mln.Addr().String() + "/metrics"
	}

	n := machine.Count(svc.Backend())
	addr := ln.Addr().String()
	who := "user " + user
	if file != nil {
		who = "users of " + cfg.HtpasswdFile
		if daemonUser {
			who += " and " + user
		}
	}
	fmt.Fprintf(out, "vbmcd: serving %d %s machine(s); Redfish at %s://%s/redfish/v1 (%s); metrics at %s\n", n, cfg.Backend, scheme, displayAddr(addr), who, metricsURL)
	if own != nil {
		fmt.Fprintf(out, "vbmcd: %d machine(s) have a BMC of their own: Redfish on %s://ADDRESS:%d/redfish/v1, IPMI on port %d of the same address\n",
			own.Listening(), scheme, cfg.bmcRedfishPort(), cfg.BMCIPMIPort)
	}
	log.Info("vbmcd started", zap.Int("machines", n), zap.String("redfish", scheme+"://"+addr), zap.Bool("ipmi", cfg.IPMI))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = asrv.Shutdown(sctx)
	if msrv != nil {
		_ = msrv.Shutdown(sctx)
	}
	if ipmiDone != nil {
		select {
		case <-ipmiDone:
		case <-sctx.Done():
		}
	}
	return runErr
}

// unspecified reports whether a listen host means every address.
func unspecified(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || (err == nil && ip.IsUnspecified())
}

// displayAddr turns ":8000" into "localhost:8000" for the banner.
func displayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "::" || host == "0.0.0.0" {
		return "localhost:" + port
	}
	return net.JoinHostPort(host, port)
}

// serviceUUID returns the service's UUID, made once and kept in dir.
func serviceUUID(dir string) (string, error) {
	p := filepath.Join(dir, "service-uuid")
	if b, err := os.ReadFile(p); err == nil {
		if s := strings.TrimSpace(string(b)); len(s) == 36 {
			return s, nil
		}
	}
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", err
	}
	u[6] = (u[6] & 0x0f) | 0x40
	u[8] = (u[8] & 0x3f) | 0x80
	s := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep the service UUID: %w", err)
	}
	return s, nil
}

// A source may fail loginBurst logins at once, then one per loginEvery. A
// good login is never slowed; ipmitool's tries and Ironic's retries fit.
const (
	loginBurst = 20
	loginEvery = time.Second
)

// outcome names a power action's result for the metrics: ok, or the kind of
// error (the same kinds the faces map to statuses and completion codes).
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, machine.ErrInvalid):
		return "invalid"
	case errors.Is(err, machine.ErrConflict):
		return "conflict"
	case errors.Is(err, machine.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, machine.ErrNotFound):
		return "not-found"
	case errors.Is(err, machine.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return "failed"
}

// registerSources adds the numbers the parts keep themselves, read at
// scrape time: machines, libvirt connections, the media cache.
func registerSources(reg *metrics.Registry, be machine.Backend, cache *media.Cache) {
	reg.Gauge("vbmcd_machines", "Machines served.", func() float64 { return float64(machine.Count(be)) })
	if hs, ok := be.(*virt.Hosts); ok {
		reg.Counter("vbmcd_libvirt_connects_total", "Connections made to libvirt, the first and every reconnect, over every host.",
			func() float64 {
				n := 0
				for _, b := range hs.Backends() {
					n += b.Conn().Connects()
				}
				return float64(n)
			})
	}
	reg.Gauge("vbmcd_media_cache_bytes", "Bytes of images in the virtual media cache.", func() float64 { return float64(cache.Stats().Bytes) })
	reg.Gauge("vbmcd_media_cache_images", "Images in the virtual media cache.", func() float64 { return float64(cache.Stats().Images) })
	reg.Counter("vbmcd_media_cache_hits_total", "Image fetches the cache answered without downloading.",
		func() float64 { return float64(cache.Stats().Hits) })
	reg.Counter("vbmcd_media_downloads_total", "Images downloaded into the cache.",
		func() float64 { return float64(cache.Stats().Downloads) })
	reg.Counter("vbmcd_media_probes_total", "Images probed (their first 64 KiB read) instead of downloaded, for simulated machines (--sim-media probe).",
		func() float64 { return float64(cache.Stats().Probes) })
}

// qemuReaches checks, as labctl's preflight does for its pools, that the
// user qemu runs as can traverse every directory down to the image cache:
// otherwise every virtual media boot fails at power-on with "Permission
// denied". The error names the directory and the fix. When that user is
// unknown here (qemu on another host), it only warns.
func qemuReaches(dir string, log *zap.Logger) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	u, err := qemuaccess.Lookup("")
	if err != nil {
		log.Warn("cannot check that qemu reaches the image cache", zap.String("dir", abs), zap.Error(err))
		return nil
	}
	if err := u.CanTraverse(abs); err != nil {
		return fmt.Errorf("--media-dir %s: %w", abs, err)
	}
	return nil
}
