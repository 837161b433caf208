package vbmcd

import (
	"context"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/metrics"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/simfile"
	"github.com/bmlab/bmlab/internal/simnotify"
	"github.com/bmlab/bmlab/internal/virt"
)

// newSim makes the sim backend: --sim-nodes alike machines, or those of
// --sim-systems, with a notifier when any of them asks for announcements
// (sushy-tools' external_notifier). The notifier sends until ctx ends.
func newSim(ctx context.Context, cfg Config, log *zap.Logger) (*sim.Backend, *simnotify.Notifier, error) {
	opts := []sim.Option{sim.WithDelay(cfg.SimDelay), sim.WithMedia(sim.MediaMode(cfg.SimMedia))} // "": fetch
	if dir := cfg.inbandDir(); dir != "" {
		opts = append(opts, sim.WithIPMISockets(dir))
	}
	// Simulated machines have the secure boot keys a VM here would
	// have: those of the host's OVMF template, when there is one.
	if vars := virt.DetectFirmware().SecureVars; vars != "" {
		if ks, err := virt.ReadKeys(vars); err != nil {
			log.Warn("secure boot keys for simulated machines: reading the OVMF template failed; their key databases are empty", zap.String("template", vars), zap.Error(err))
		} else {
			opts = append(opts, sim.WithFactoryKeys(ks))
		}
	}
	if cfg.SimSystems == "" {
		return sim.New(cfg.SimNodes, opts...), nil, nil
	}
	f, err := simfile.Load(cfg.SimSystems)
	if err != nil {
		return nil, nil, err
	}
	log.Info("systems file read", zap.String("file", cfg.SimSystems), zap.String("form", f.Form), zap.Int("systems", len(f.Systems)))
	for _, s := range f.Ignored {
		log.Info("a sushy-tools setting the systems file does not give vbmcd (vbmcd sushy-emulator maps the listen address, TLS, the driver and the libvirt URI from it; the rest are vbmcd flags)", zap.String("setting", s))
	}
	if f.Media != "" && cfg.SimMedia == "" {
		opts = append(opts, sim.WithMedia(f.Media))
	}
	notify := 0
	for _, s := range f.Systems {
		if s.Notify {
			notify++
		}
	}
	var n *simnotify.Notifier
	if notify > 0 {
		url := f.Notifier.URL
		if cfg.SimNotifyURL != "" {
			url = cfg.SimNotifyURL
		}
		n, err = simnotify.New(simnotify.Config{URL: url, CAFile: f.Notifier.CAFile, CertFile: f.Notifier.CertFile, KeyFile: f.Notifier.KeyFile, Log: log.Named("notify")})
		if err != nil {
			return nil, nil, err
		}
		go n.Run(ctx)
		opts = append(opts, sim.WithNotify(n.Notify))
		log.Info("announcing the changes of simulated machines, as sushy-tools' fake driver does", zap.String("url", url), zap.Int("machines", notify))
	}
	b, err := sim.NewSystems(f.Systems, opts...)
	if err != nil {
		return nil, nil, err
	}
	return b, n, nil
}

// registerNotifier publishes what became of the announcements.
func registerNotifier(reg *metrics.Registry, n *simnotify.Notifier) {
	if n == nil {
		return
	}
	reg.Counter("vbmcd_notifications_sent_total", "Announcements of simulated machines' changes delivered to the notification listener (sushy-tools' EXTERNAL_NOTIFICATION_URL).",
		func() float64 { return float64(n.Stats().Sent) })
	reg.Counter("vbmcd_notifications_retries_total", "Announcements PUT again after a failure.",
		func() float64 { return float64(n.Stats().Retries) })
	reg.Counter("vbmcd_notifications_failed_total", "Announcements given up: the listener was down for every attempt, or refused them (4xx).",
		func() float64 { return float64(n.Stats().Failed) })
	reg.Counter("vbmcd_notifications_dropped_total", "Announcements pushed out of a full queue before they were sent.",
		func() float64 { return float64(n.Stats().Dropped) })
	reg.Gauge("vbmcd_notifications_queued", "Announcements waiting to be sent.",
		func() float64 { return float64(n.Stats().Queued) })
}
