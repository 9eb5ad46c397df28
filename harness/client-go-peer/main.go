// Command client-go-peer is the reference point for kcache's benchmarks: client-go's own
// SharedInformerFactory watching the pods of one namespace (or, with --dataset=widgets, the
// dynamic informer factory watching kcache bench's custom resources as unstructured
// objects), with a controller's handler as kcache's default line has (every add, update and
// delete enqueues the object's key into a rate-limited work queue that one worker drains). It
// syncs, measures, optionally waits for a number of update events, and prints
// ONE JSON line on stdout:
//
//	{"peer":"client-go","client_go":"v0.36.5","namespace":"bench","mode":"list-watch","protobuf":false,"n":1000,
//	 "expected_n":1000,"sync_ms":...,"sync_cpu_s":...,"vmhwm_bytes":...,"rss_after_sync_bytes":...,
//	 "update_events":...,"update_events_per_s":...,"update_cpu_s":...,
//	 "sync_page_faults":...,"update_page_faults":...,
//	 "list_requests":...,"watch_list_requests":...,"watch_requests":...}
//
// sync_ms and sync_cpu_s cover factory start until WaitForCacheSync returns (wall clock; user+system
// CPU of the whole process from getrusage). vmhwm_bytes and rss_after_sync_bytes are VmHWM and
// VmRSS from /proc/self/status right after sync. With --updates=N the program then waits for N
// update events; the rate and CPU cover the window from the first to the N-th update event
// (update_* are null without --updates); *_page_faults are the process's page faults
// (getrusage minflt + majflt) over the same windows. The *_requests counters record what client-go sent
// (a plain list, a streaming watch-list with sendInitialEvents=true, plain watches) so a run can
// prove which mode it really used.
//
// With --follow the informer keeps running after that line: each line read from stdin is
// answered with one line {"pods":{"<name>":"<resourceVersion>",...}} (the cache now), until
// stdin closes; the fault-proxy test compares it with a fresh LIST.
//
// Exit status: 0 when synced (and, with --updates, all updates seen) and the object count equals
// --n (when given); 1 otherwise, with the reason on stderr (the JSON line is still printed when
// sync succeeded). 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// clientGoVersion is the k8s.io/client-go version linked into this binary (from go.mod).
var clientGoVersion = func() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/client-go" {
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}()

type options struct {
	kubeconfig string
	namespace  string
	dataset    string
	n          int
	mode       string
	protobuf   bool
	updates    int
	timeout    time.Duration
	readyFile  string
	follow     bool
}

// result is the one JSON line; pointers are null when not measured.
type result struct {
	Peer              string   `json:"peer"`
	ClientGo          string   `json:"client_go"`
	Mode              string   `json:"mode"`
	Protobuf          bool     `json:"protobuf"`
	Namespace         string   `json:"namespace"`
	N                 int      `json:"n"`
	ExpectedN         *int     `json:"expected_n"`
	SyncMs            float64  `json:"sync_ms"`
	SyncCPUSeconds    float64  `json:"sync_cpu_s"`
	VmHWMBytes        uint64   `json:"vmhwm_bytes"`
	RSSAfterSyncBytes uint64   `json:"rss_after_sync_bytes"`
	UpdateEvents      *int64   `json:"update_events"`
	UpdateEventsPerS  *float64 `json:"update_events_per_s"`
	UpdateCPUSeconds  *float64 `json:"update_cpu_s"`
	SyncPageFaults    int64    `json:"sync_page_faults"`
	UpdatePageFaults  *int64   `json:"update_page_faults"`
	ListRequests      int64    `json:"list_requests"`
	WatchListRequests int64    `json:"watch_list_requests"`
	WatchRequests     int64    `json:"watch_requests"`
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("client-go-peer", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (required)")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace whose objects are watched")
	fs.StringVar(&o.dataset, "dataset", "pods", "objects to cache: pods (typed informer) or widgets (kcache bench's custom resources, dynamic informer, JSON only)")
	fs.IntVar(&o.n, "n", -1, "expected number of pods after sync (checked when >= 0)")
	fs.StringVar(&o.mode, "mode", "list-watch", "initial load: list-watch (paged LIST, then WATCH) or streaming (WATCH with sendInitialEvents)")
	fs.BoolVar(&o.protobuf, "protobuf", false, "use application/vnd.kubernetes.protobuf (client-go's own default for built-in kinds) instead of JSON only")
	fs.IntVar(&o.updates, "updates", 0, "after sync, wait for this many update events and measure their rate")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up (exit 1) if sync plus updates take longer")
	fs.StringVar(&o.readyFile, "ready-file", "", "create this file once the informer has synced (for drivers that then send updates)")
	fs.BoolVar(&o.follow, "follow", false, "after the JSON line, keep the informer running and answer each stdin line with a snapshot line {\"pods\":{name:resourceVersion}} until stdin closes (no --timeout then)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() != 0:
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.kubeconfig == "":
		return o, errors.New("--kubeconfig is required")
	case o.dataset != "pods" && o.dataset != "widgets":
		return o, fmt.Errorf("--dataset must be pods or widgets, not %q", o.dataset)
	case o.dataset == "widgets" && o.protobuf:
		return o, errors.New("--dataset=widgets is JSON only: custom resources have no protobuf")
	case o.mode != "list-watch" && o.mode != "streaming":
		return o, fmt.Errorf("--mode must be list-watch or streaming, not %q", o.mode)
	case o.updates < 0:
		return o, errors.New("--updates must be >= 0")
	case o.timeout <= 0:
		return o, errors.New("--timeout must be positive")
	case o.follow && o.updates > 0:
		return o, errors.New("--follow and --updates cannot be combined")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "client-go-peer:", err)
		}
		os.Exit(2)
	}
	// client-go reads its feature gates from the environment on first use; set the one that
	// selects the initial load before anything of client-go runs.
	if o.mode == "streaming" {
		os.Setenv("KUBE_FEATURE_WatchListClient", "true")
	} else {
		os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "client-go-peer:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// --timeout bounds the sync; in --follow mode the informer then runs until stdin closes.
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			if !o.follow {
				stop()
			}
		case <-runCtx.Done():
		}
	}()

	counts := &requestCounts{}
	cfg, err := newClient(o, counts)
	if err != nil {
		return err
	}

	upd := newUpdateCounter(o.updates)
	informer, err := newInformer(cfg, o.dataset, o.namespace)
	if err != nil {
		return err
	}
	keys := newKeyQueue()
	go keys.run()
	defer keys.shutDown()
	if _, err := informer.AddEventHandler(upd.handler(keys)); err != nil {
		return fmt.Errorf("add event handler: %w", err)
	}

	cpu0, err := cpuSeconds()
	if err != nil {
		return err
	}
	faults0 := pageFaults()
	start := time.Now()
	informer.start(runCtx.Done())
	notSynced := informer.waitSync(ctx.Done())
	syncWall := time.Since(start)
	cpu1, err := cpuSeconds()
	if err != nil {
		return err
	}
	syncFaults := pageFaults() - faults0
	if notSynced != "" {
		return fmt.Errorf("informer for %v did not sync within --timeout=%s", notSynced, o.timeout)
	}
	upd.markSynced()
	mem, err := memory()
	if err != nil {
		return err
	}

	res := result{
		Peer:              "client-go",
		ClientGo:          clientGoVersion,
		Mode:              o.mode,
		Protobuf:          o.protobuf,
		Namespace:         o.namespace,
		N:                 len(informer.GetStore().ListKeys()),
		SyncMs:            float64(syncWall.Microseconds()) / 1000,
		SyncCPUSeconds:    cpu1 - cpu0,
		SyncPageFaults:    syncFaults,
		VmHWMBytes:        mem.VmHWM,
		RSSAfterSyncBytes: mem.VmRSS,
	}
	if o.n >= 0 {
		res.ExpectedN = &o.n
	}
	if o.readyFile != "" {
		if err := os.WriteFile(o.readyFile, []byte("synced\n"), 0o644); err != nil {
			return fmt.Errorf("write --ready-file: %w", err)
		}
	}

	var waitErr error
	if o.updates > 0 {
		w, err := upd.wait(ctx)
		if err != nil {
			waitErr = fmt.Errorf("saw %d of %d update events before --timeout=%s", w.events, o.updates, o.timeout)
		} else {
			res.UpdateEvents = &w.events
			res.UpdateEventsPerS = &w.perSecond
			res.UpdateCPUSeconds = &w.cpuSeconds
			res.UpdatePageFaults = &w.pageFaults
		}
	}
	res.ListRequests, res.WatchListRequests, res.WatchRequests = counts.snapshot()

	line, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	fmt.Println(string(line))
	if o.follow && waitErr == nil {
		return follow(informer.GetStore(), os.Stdin, os.Stdout)
	}

	switch {
	case waitErr != nil:
		return waitErr
	case o.n >= 0 && res.N != o.n:
		return fmt.Errorf("synced %d %s in namespace %q, expected --n=%d", res.N, o.dataset, o.namespace, o.n)
	case o.mode == "streaming" && res.WatchListRequests == 0:
		return errors.New("--mode=streaming but client-go sent no watch-list (sendInitialEvents) request")
	case o.mode == "list-watch" && res.ListRequests == 0:
		return errors.New("--mode=list-watch but client-go sent no LIST request")
	}
	return nil
}

// updateCounter counts update events seen after sync and times the window between the first
// and the target-th of them.
type updateCounter struct {
	target   int64
	synced   atomic.Bool
	events   atomic.Int64
	mu       sync.Mutex
	first    time.Time
	firstCPU float64
	// firstFaults: page faults at the first counted event.
	firstFaults int64
	done        chan window
	once        sync.Once
}

type window struct {
	events     int64
	perSecond  float64
	cpuSeconds float64
	pageFaults int64
}

func newUpdateCounter(target int) *updateCounter {
	return &updateCounter{target: int64(target), done: make(chan window, 1)}
}

func (u *updateCounter) markSynced() { u.synced.Store(true) }

func (u *updateCounter) onUpdate() {
	if u.target == 0 || !u.synced.Load() {
		return
	}
	n := u.events.Add(1)
	now := time.Now()
	if n == 1 {
		cpu, _ := cpuSeconds()
		faults := pageFaults()
		u.mu.Lock()
		u.first, u.firstCPU, u.firstFaults = now, cpu, faults
		u.mu.Unlock()
	}
	if n == u.target {
		cpu, _ := cpuSeconds()
		faults := pageFaults()
		u.mu.Lock()
		first, firstCPU, firstFaults := u.first, u.firstCPU, u.firstFaults
		u.mu.Unlock()
		w := window{events: n, cpuSeconds: cpu - firstCPU, pageFaults: faults - firstFaults}
		if elapsed := now.Sub(first).Seconds(); n > 1 && elapsed > 0 {
			w.perSecond = float64(n-1) / elapsed
		}
		u.once.Do(func() { u.done <- w })
	}
}

func (u *updateCounter) wait(ctx context.Context) (window, error) {
	select {
	case w := <-u.done:
		return w, nil
	case <-ctx.Done():
		return window{events: u.events.Load()}, ctx.Err()
	}
}

// requestCounts records the kind of each request client-go sends.
type requestCounts struct {
	list, watchList, watch atomic.Int64
}

func (c *requestCounts) snapshot() (int64, int64, int64) {
	return c.list.Load(), c.watchList.Load(), c.watch.Load()
}

type countingTransport struct {
	next   http.RoundTripper
	counts *requestCounts
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	switch {
	case q.Get("watch") == "true" || q.Get("watch") == "1":
		if q.Get("sendInitialEvents") == "true" {
			t.counts.watchList.Add(1)
		} else {
			t.counts.watch.Add(1)
		}
	case req.Method == http.MethodGet:
		t.counts.list.Add(1)
	}
	return t.next.RoundTrip(req)
}
