package main

import (
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// newClient builds a clientset from the kubeconfig (TLS verification as the kubeconfig says),
// with the chosen wire format and a transport wrapper that counts list/watch requests.
func newClient(o options, counts *requestCounts) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load --kubeconfig %s: %w", o.kubeconfig, err)
	}
	if o.protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	cfg.UserAgent = "kcache-client-go-peer/" + clientGoVersion
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, counts: counts}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return cs, nil
}

// newPodInformer returns a factory (no resync) and its informer for the pods of namespace.
func newPodInformer(cs kubernetes.Interface, namespace string) (informers.SharedInformerFactory, cache.SharedIndexInformer) {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	return factory, factory.Core().V1().Pods().Informer()
}

// handler counts updates of pods after sync; adds and deletes are not measured.
func (u *updateCounter) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, newObj interface{}) {
			if _, ok := newObj.(*corev1.Pod); ok {
				u.onUpdate()
			}
		},
	}
}
