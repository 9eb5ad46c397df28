// Package smoke starts controller-runtime's envtest unchanged: with KUBEBUILDER_ASSETS pointing
// at `kcache envtest-assets DIR` it runs against kcache's server, with the real binaries
// against kube-apiserver and etcd. The test code is the same for both.
package smoke

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

var widgetList = schema.GroupVersionKind{Group: "smoke.kcache.dev", Version: "v1", Kind: "WidgetList"}

func widget(name string, size int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("smoke.kcache.dev/v1")
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
	return u
}

func TestEnvtestStartsAndServesCRDs(t *testing.T) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest start: %v", err)
	}
	startup := time.Since(start)
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("envtest stop: %v", err)
		}
	})
	t.Logf("envtest started in %v", startup)
	if out := os.Getenv("ENVTEST_SMOKE_TIMING"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%d\n", startup.Milliseconds())
			f.Close()
		}
	}

	ctx := context.Background()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	for i, name := range []string{"b", "a"} {
		if err := c.Create(ctx, widget(name, int64(i+1))); err != nil {
			t.Fatalf("create widget %s: %v", name, err)
		}
	}
	// The CRD's schema is enforced: size below its minimum is Invalid.
	if err := c.Create(ctx, widget("tiny", 0)); !apierrors.IsInvalid(err) {
		t.Fatalf("a widget of size 0: want Invalid, got %v", err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(widgetList)
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
		t.Fatalf("list widgets: %v", err)
	}
	var names []string
	for _, item := range list.Items {
		names = append(names, item.GetName())
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[a b]" {
		t.Fatalf("widgets listed: %v, want [a b]", names)
	}

	// Built-in kinds through the typed client.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil || got.Data["k"] != "v" {
		t.Fatalf("get configmap: %v %v", got.Data, err)
	}

	// A bare kube-apiserver: no service account controller, so no `default` ServiceAccount.
	sa := &corev1.ServiceAccount{}
	err = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, sa)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the default ServiceAccount: want NotFound on a bare kube-apiserver, got %v", err)
	}

	// A second user (AddUser: a client certificate envtest's CA signs) in system:masters.
	user, err := env.AddUser(envtest.User{Name: "jane", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add user: %v", err)
	}
	uc, err := client.New(user.Config(), client.Options{})
	if err != nil {
		t.Fatalf("user client: %v", err)
	}
	if err := uc.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("get as jane: %v", err)
	}

	// A user with no roles: envtest runs kube-apiserver with RBAC, so the read is forbidden.
	joe, err := env.AddUser(envtest.User{Name: "joe"}, nil)
	if err != nil {
		t.Fatalf("add user joe: %v", err)
	}
	jc, err := client.New(joe.Config(), client.Options{})
	if err != nil {
		t.Fatalf("joe's client: %v", err)
	}
	err = jc.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("get as joe (no roles): want Forbidden, got %v", err)
	}
	want := `configmaps "` + cm.Name + `" is forbidden: User "joe" cannot get resource "configmaps" in API group "" in the namespace "default"`
	if err.Error() != want {
		t.Fatalf("get as joe: message\n got %q\nwant %q", err.Error(), want)
	}
}
