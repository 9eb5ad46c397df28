package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestFollowAnswersEachLineWithTheCachedPodsAndTheirResourceVersions(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for name, rv := range map[string]string{"a": "10", "b": "12"} {
		if err := store.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := follow(store, strings.NewReader("dump\ndump\n"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("two requests gave %d lines: %q", len(lines), out.String())
	}
	var s snapshot
	if err := json.Unmarshal([]byte(lines[1]), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 2 || s.Pods["a"] != "10" || s.Pods["b"] != "12" {
		t.Fatalf("snapshot %+v", s)
	}
}
