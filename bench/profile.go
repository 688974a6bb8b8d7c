package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profiles writes a CPU profile of each measured Caddy configuration, taken
// from its admin endpoint while the load generator runs against it as in
// the rounds.
func (b *bench) profiles() ([]string, error) {
	if err := os.MkdirAll(b.o.profile, 0o755); err != nil {
		return nil, err
	}
	secs := max(1, int(b.o.duration.Round(time.Second)/time.Second))
	var files []string
	for i, size := range b.sizes {
		for _, c := range b.sel.Throughput {
			p := b.caddies[c.Name]
			size, measured := c.sizeAt(i, size)
			if p == nil || !measured {
				continue
			}
			if b.stop.Load() {
				return files, errInterrupted
			}
			file := filepath.Join(b.o.profile, c.Name+"-"+strings.ReplaceAll(sizeLabel(size), " ", "")+".pprof")
			got := make(chan error, 1)
			go func() { got <- fetchProfile(p.Admin, secs, file) }()
			smp := measure(b.target(c, size), b.o.clients, b.o.warmup/2, time.Duration(secs)*time.Second+b.o.warmup, &b.stop)
			if err := <-got; err != nil {
				return files, fmt.Errorf("profiling %s: %w", c.Name, err)
			}
			log.Printf("profiled %-17s %6s: %8.0f req/s under the profiler: %s", c.Name, sizeLabel(size), smp.RPS(), file)
			files = append(files, file)
		}
	}
	return files, nil
}

func fetchProfile(admin string, secs int, file string) error {
	resp, err := http.Get("http://" + admin + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, msg)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
