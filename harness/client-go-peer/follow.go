package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// snapshot is one answer of --follow: every cached pod's name and resourceVersion.
type snapshot struct {
	Pods map[string]string `json:"pods"`
}

// follow answers each line read from in with one JSON snapshot line of store on out, until in
// ends (the driver closes stdin) or a write fails. Drivers (the fault-proxy test) compare it with
// a fresh LIST to see when the cache has converged.
func follow(store cache.Store, in io.Reader, out io.Writer) error {
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		if _, err := fmt.Fprintln(out, snapshotLine(store)); err != nil {
			return fmt.Errorf("write snapshot: %w", err)
		}
	}
	return lines.Err()
}

func snapshotLine(store cache.Store) string {
	s := snapshot{Pods: map[string]string{}}
	for _, o := range store.List() {
		if p, ok := o.(*corev1.Pod); ok {
			s.Pods[p.Name] = p.ResourceVersion
		}
	}
	line, _ := json.Marshal(s)
	return string(line)
}
