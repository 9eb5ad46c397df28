package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A JSON line asks for JSON only: client-go's typed clients ask for protobuf first when the
// config names no content type (rest.Request.UseProtobufAsDefault), so a JSON line that left
// it unset would compare kcache's JSON with client-go's protobuf.
func TestWireFormatIsWhatTheLineSays(t *testing.T) {
	var mu sync.Mutex
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accept = r.Header.Get("Accept")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\n"+
		"users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"+
		"current-context: c\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		protobuf bool
		want     string
	}{
		{false, "application/json"},
		{true, "application/vnd.kubernetes.protobuf,application/json"},
	} {
		rc, err := newClient(options{kubeconfig: kubeconfig, protobuf: tc.protobuf}, &requestCounts{})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := accept
		mu.Unlock()
		if !strings.HasPrefix(got, tc.want) || (!tc.protobuf && strings.Contains(got, "protobuf")) {
			t.Errorf("protobuf=%v: Accept %q, want %q", tc.protobuf, got, tc.want)
		}
	}
}
