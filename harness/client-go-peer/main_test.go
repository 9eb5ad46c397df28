package main

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestParseFlagsRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{}, // no --kubeconfig
		{"--kubeconfig", "k", "--mode", "chunked"}, // unknown mode
		{"--kubeconfig", "k", "--updates", "-1"},
		{"--kubeconfig", "k", "--timeout", "0s"},
		{"--kubeconfig", "k", "extra"},
		{"--kubeconfig", "k", "--follow", "--updates", "2"},
		{"--kubeconfig", "k", "--dataset", "nodes"},
		{"--kubeconfig", "k", "--dataset", "widgets", "--protobuf"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted bad input", args)
		}
	}
	o, err := parseFlags([]string{"--kubeconfig", "k", "--namespace", "ns", "--n", "7", "--mode", "streaming", "--protobuf", "--updates", "3"})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	if o.kubeconfig != "k" || o.namespace != "ns" || o.n != 7 || o.mode != "streaming" || !o.protobuf || o.updates != 3 {
		t.Fatalf("parseFlags parsed %+v", o)
	}
}

func TestMemoryReadsPeakAndCurrentRSS(t *testing.T) {
	m, err := memory()
	if err != nil {
		t.Fatal(err)
	}
	if m.VmRSS == 0 || m.VmHWM < m.VmRSS {
		t.Fatalf("implausible memory status %+v", m)
	}
}

func TestCPUSecondsGrowsWithWork(t *testing.T) {
	before, err := cpuSeconds()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for after := before; after <= before; after, _ = cpuSeconds() {
		for i := 0; i < 1_000_000; i++ {
			x += i
		}
	}
	_ = x
}

type nopTransport struct{}

func (nopTransport) RoundTrip(*http.Request) (*http.Response, error) { return &http.Response{}, nil }

func TestCountingTransportClassifiesListWatchAndWatchList(t *testing.T) {
	c := &requestCounts{}
	rt := countingTransport{next: nopTransport{}, counts: c}
	for _, q := range []string{
		"limit=500&resourceVersion=0",                                         // list
		"watch=true&resourceVersion=12",                                       // watch
		"watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", // watch-list
		"watch=1", // watch
	} {
		u, _ := url.Parse("https://127.0.0.1/api/v1/namespaces/x/pods?" + q)
		if _, err := rt.RoundTrip(&http.Request{Method: http.MethodGet, URL: u}); err != nil {
			t.Fatal(err)
		}
	}
	if l, wl, w := c.snapshot(); l != 1 || wl != 1 || w != 2 {
		t.Fatalf("list=%d watch-list=%d watch=%d, want 1 1 2", l, wl, w)
	}
}

func TestUpdateCounterIgnoresUpdatesBeforeSyncAndReportsTheTargetWindow(t *testing.T) {
	u := newUpdateCounter(3)
	u.onUpdate() // before sync: part of the initial load, not counted
	u.markSynced()
	for i := 0; i < 3; i++ {
		u.onUpdate()
	}
	u.onUpdate() // past the target: ignored
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w, err := u.wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w.events != 3 || w.perSecond <= 0 || w.cpuSeconds < 0 {
		t.Fatalf("window %+v", w)
	}
}

func TestUpdateCounterTimesOutWithTheCountSoFar(t *testing.T) {
	u := newUpdateCounter(2)
	u.markSynced()
	u.onUpdate()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	w, err := u.wait(ctx)
	if err == nil || w.events != 1 {
		t.Fatalf("wait = %+v, %v; want a timeout after 1 event", w, err)
	}
}

func TestHandlerEnqueuesEveryKeyForOneWorker(t *testing.T) {
	// The handler is a controller's, as kcache's default line has: adds, updates and deletes
	// enqueue the object's key into a rate-limited work queue that one worker drains.
	keys := newKeyQueue()
	go keys.run()
	defer keys.shutDown()
	upd := newUpdateCounter(0)
	h := upd.handler(keys)
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	h.OnAdd(pod("a"), false)
	h.OnUpdate(pod("b"), pod("b"))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: pod("c")})
	deadline := time.Now().Add(10 * time.Second)
	for keys.drained.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the worker drained %d keys of 3", keys.drained.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if n := keys.q.Len(); n != 0 {
		t.Fatalf("%d keys left in the queue", n)
	}
}
