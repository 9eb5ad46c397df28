// Command controller-runtime-peer is the controller-runtime side of `kcache bench-operator`:
// the Team operator (one ConfigMap per Team holding the number of Pods of its namespace)
// written as a controller-runtime v0.25 operator would be. Teams (CRD teams.bench.kcache.io,
// read as unstructured objects) are the primary type, their ConfigMaps are owned
// (Owns), and every Pod event maps to the Teams of its namespace (Watches with
// EnqueueRequestsFromMapFunc). A reconcile counts the namespace's Pods from the cache (its
// namespace index) and applies the ConfigMap (server-side apply) only when the count changed.
//
// It prints ONE JSON line on stdout, with the fields of bench/operator-peer's:
//
//	{"peer":"controller-runtime","version":"v0.25.3","n":...,"teams":...,"namespaces":...,
//	 "full_reconcile_ms":...,"sync_cpu_s":...,"rss_after_sync_bytes":...,"vmhwm_bytes":...,
//	 "requests_sync":...,"reconciles_sync":...,"updates":...,"update_events":...,
//	 "update_s":...,"update_cpu_s":...,"cpu_per_update_us":...,"reconciles_update":...,
//	 "reconciles_per_s":...,"requests_update":...,"watches_update":...,"vmhwm_end_bytes":...}
//
// full_reconcile_ms is from the manager's start until every Team's ConfigMap holds its
// namespace's Pod count (the pods of namespace k of --namespaces M are --n/M, plus one for k
// below --n mod M). With --updates U the peer then creates --ready-file and waits for U Pod
// update events and for the reconciles they cause to end (1 s without one); the update
// window runs from the first update event to the last reconcile. Requests are counted by a
// RoundTripper on the manager's REST config; watches_update counts the watch requests among
// the update phase's (a watch the server ended and the informer opened again). Exit 1 on a timeout (reason on stderr).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// teamLabel marks the ConfigMaps the operator writes (its ConfigMap cache selects them).
const teamLabel = "bench.kcache.io/team"

var teamGVK = schema.GroupVersionKind{Group: "bench.kcache.io", Version: "v1", Kind: "Team"}

func runtimeVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "sigs.k8s.io/controller-runtime" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// counting counts the requests sent through it, and the watches among them.
type counting struct {
	next    http.RoundTripper
	n       *atomic.Int64
	watches *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if r.URL.Query().Get("watch") == "true" {
		c.watches.Add(1)
	}
	return c.next.RoundTrip(r)
}

// tracker records each Team's last reconciled count and how many are right.
type tracker struct {
	mu       sync.Mutex
	seen     map[string]int
	correct  int
	expected func(ns string) int
	recs     atomic.Int64
	lastRec  atomic.Int64 // unix nanos of the last reconcile's end
	events   atomic.Int64 // Pod events mapped after ready
	firstEv  atomic.Int64
	ready    atomic.Bool
}

func (t *tracker) record(ns, name string, count int) {
	key := ns + "/" + name
	want := t.expected(ns)
	t.mu.Lock()
	old, had := t.seen[key]
	if had && old == want {
		t.correct--
	}
	t.seen[key] = count
	if count == want {
		t.correct++
	}
	t.mu.Unlock()
	t.recs.Add(1)
	t.lastRec.Store(time.Now().UnixNano())
}

func (t *tracker) allCorrect(teams int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.correct == teams
}

type reconciler struct {
	client.Client
	t *tracker
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	team := &unstructured.Unstructured{}
	team.SetGroupVersionKind(teamGVK)
	if err := r.Get(ctx, req.NamespacedName, team); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(req.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	count := len(pods.Items)
	var cm corev1.ConfigMap
	err := r.Get(ctx, req.NamespacedName, &cm)
	if err == nil && cm.Data["pods"] == strconv.Itoa(count) {
		r.t.record(req.Namespace, req.Name, count)
		return reconcile.Result{}, nil
	}
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	owner := metav1ac.OwnerReference().WithAPIVersion(teamGVK.GroupVersion().String()).
		WithKind(teamGVK.Kind).WithName(team.GetName()).WithUID(team.GetUID()).
		WithController(true).WithBlockOwnerDeletion(true)
	apply := corev1ac.ConfigMap(req.Name, req.Namespace).
		WithLabels(map[string]string{teamLabel: req.Name}).
		WithOwnerReferences(owner).
		WithData(map[string]string{"pods": strconv.Itoa(count)})
	if err := r.Apply(ctx, apply, client.FieldOwner("team-operator"), client.ForceOwnership); err != nil {
		return reconcile.Result{}, err
	}
	r.t.record(req.Namespace, req.Name, count)
	return reconcile.Result{}, nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controller-runtime-peer: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	// Its own flag set: controller-runtime registers a global --kubeconfig flag.
	flag := flag.NewFlagSet("controller-runtime-peer", flag.ExitOnError)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the server")
	prefix := flag.String("namespace", "op-bench", "namespace prefix: the Teams and Pods are in PREFIX-0 .. PREFIX-(M-1)")
	namespaces := flag.Int("namespaces", 100, "the number of namespaces M")
	n := flag.Int("n", 0, "the number of Pods, over all namespaces")
	teams := flag.Int("teams", 0, "the number of Teams")
	updates := flag.Int("updates", 0, "after the full reconcile, wait for this many Pod update events")
	readyFile := flag.String("ready-file", "", "created after the full reconcile")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	workers := flag.Int("workers", 2, "concurrent reconciles")
	_ = flag.Parse(os.Args[1:])
	if *kubeconfig == "" || *teams <= 0 || *namespaces <= 0 {
		fmt.Fprintln(os.Stderr, "controller-runtime-peer: --kubeconfig, --teams and --namespaces are required")
		os.Exit(2)
	}
	ctrl.SetLogger(logr.Discard())
	perNs := map[string]int{}
	for k := 0; k < *namespaces; k++ {
		c := *n / *namespaces
		if k < *n%*namespaces {
			c++
		}
		perNs[fmt.Sprintf("%s-%d", *prefix, k)] = c
	}
	t := &tracker{seen: map[string]int{}, expected: func(ns string) int { return perNs[ns] }}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling (as the Rust peers)
	var requests, watches atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{rt, &requests, &watches} })

	start := time.Now()
	cpu0, _ := cpuSeconds()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	selector := labels.SelectorFromSet(nil)
	if req, err := labels.Parse(teamLabel); err == nil {
		selector = req
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: selector},
		}},
		// The Team is unstructured (no Go type): without this its Gets and Lists, the Pod
		// mapping's included, would go to the server instead of the informer's cache.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		fail("manager: %v", err)
	}
	team := &unstructured.Unstructured{}
	team.SetGroupVersionKind(teamGVK)
	c := mgr.GetClient()
	mapPod := func(ctx context.Context, o client.Object) []reconcile.Request {
		if t.ready.Load() {
			if t.events.Add(1) == 1 {
				t.firstEv.Store(time.Now().UnixNano())
			}
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(teamGVK.GroupVersion().WithKind("TeamList"))
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, item := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&item)})
		}
		return reqs
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("team").
		For(team).
		Owns(&corev1.ConfigMap{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(mapPod)).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(&reconciler{Client: c, t: t})
	if err != nil {
		fail("controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !t.allCorrect(*teams) {
		select {
		case err := <-done:
			fail("manager stopped: %v", err)
		case <-ctx.Done():
			fail("timeout: %d of %d Teams reconciled with the right count", t.correct, *teams)
		case <-tick.C:
		}
	}
	wall := time.Since(start)
	cpu1, _ := cpuSeconds()
	mem, err := memory()
	if err != nil {
		fail("%v", err)
	}
	line := map[string]any{
		"peer": "controller-runtime", "version": runtimeVersion(), "n": *n, "teams": *teams,
		"namespaces": *namespaces, "full_reconcile_ms": float64(wall.Microseconds()) / 1000,
		"sync_cpu_s": cpu1 - cpu0, "rss_after_sync_bytes": mem.VmRSS, "vmhwm_bytes": mem.VmHWM,
		"requests_sync": requests.Load(), "reconciles_sync": t.recs.Load(), "updates": *updates,
	}
	reqSync, recSync, watchSync := requests.Load(), t.recs.Load(), watches.Load()
	t.ready.Store(true)
	if *readyFile != "" {
		if err := os.WriteFile(*readyFile, nil, 0o644); err != nil {
			fail("ready file: %v", err)
		}
	}
	if *updates > 0 {
		for {
			select {
			case err := <-done:
				fail("manager stopped: %v", err)
			case <-ctx.Done():
				fail("timeout: %d of %d update events", t.events.Load(), *updates)
			case <-tick.C:
			}
			last := t.lastRec.Load()
			if t.events.Load() >= int64(*updates) && time.Since(time.Unix(0, last)) > time.Second {
				break
			}
		}
		cpu2, _ := cpuSeconds()
		window := time.Duration(t.lastRec.Load() - t.firstEv.Load()).Seconds()
		recs := t.recs.Load() - recSync
		line["update_events"] = t.events.Load()
		line["update_s"] = window
		line["update_cpu_s"] = cpu2 - cpu1
		line["cpu_per_update_us"] = (cpu2 - cpu1) / float64(*updates) * 1e6
		line["reconciles_update"] = recs
		if window > 0 {
			line["reconciles_per_s"] = float64(recs) / window
		}
		line["requests_update"] = requests.Load() - reqSync
		line["watches_update"] = watches.Load() - watchSync
	}
	if mem, err := memory(); err == nil {
		line["vmhwm_end_bytes"] = mem.VmHWM
	}
	out, _ := json.Marshal(line)
	fmt.Println(string(out))
}
