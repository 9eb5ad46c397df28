package main

import (
	"fmt"
	"net/http"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// newClient builds a clientset from the kubeconfig (TLS verification as the kubeconfig says),
// with the chosen wire format and a transport wrapper that counts list/watch requests.
func newClient(o options, counts *requestCounts) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load --kubeconfig %s: %w", o.kubeconfig, err)
	}
	if o.protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	} else {
		// Named, or the typed clientset asks for protobuf first (client-go's default for
		// built-in kinds since rest.Request.UseProtobufAsDefault): a JSON line is JSON.
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	cfg.UserAgent = "kcache-client-go-peer/" + clientGoVersion
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, counts: counts}
	})
	return cfg, nil
}

// widgets is the resource of the custom-resource dataset (kcache bench's CRD).
var widgets = schema.GroupVersionResource{Group: "bench.kcache.io", Version: "v1", Resource: "widgets"}

// informer is one factory's informer with the factory's Start and WaitForCacheSync.
type informer struct {
	cache.SharedIndexInformer
	start func(stop <-chan struct{})
	// waitSync reports the resource that did not sync ("" when all did).
	waitSync func(stop <-chan struct{}) string
}

// newInformer returns the informer of the dataset's objects in namespace, from a factory
// with no resync: pods through the typed clientset's factory, widgets through the dynamic
// client's factory (unstructured objects, JSON: custom resources have no protobuf).
func newInformer(cfg *rest.Config, dataset, namespace string) (informer, error) {
	if dataset == "widgets" {
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return informer{}, fmt.Errorf("create dynamic client: %w", err)
		}
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, namespace, nil)
		inf := f.ForResource(widgets).Informer()
		return informer{inf, f.Start, func(stop <-chan struct{}) string {
			for gvr, ok := range f.WaitForCacheSync(stop) {
				if !ok {
					return gvr.String()
				}
			}
			return ""
		}}, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return informer{}, fmt.Errorf("create client: %w", err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	return informer{inf, f.Start, func(stop <-chan struct{}) string {
		for typ, ok := range f.WaitForCacheSync(stop) {
			if !ok {
				return typ.String()
			}
		}
		return ""
	}}, nil
}

// keyQueue is a controller's work queue as kcache's default line has one: object keys into a
// rate-limited queue (client-go's default controller rate limiter) that one worker drains,
// forgetting and finishing each key (the reconcile itself is not part of the measure).
type keyQueue struct {
	q workqueue.TypedRateLimitingInterface[string]
	// drained counts the keys the worker finished.
	drained atomic.Int64
}

func newKeyQueue() *keyQueue {
	return &keyQueue{q: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// run is the worker: it returns when the queue is shut down.
func (k *keyQueue) run() {
	for {
		key, shutdown := k.q.Get()
		if shutdown {
			return
		}
		k.q.Forget(key)
		k.q.Done(key)
		k.drained.Add(1)
	}
}

func (k *keyQueue) shutDown() { k.q.ShutDown() }

func (k *keyQueue) enqueue(obj interface{}) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		k.q.Add(key)
	}
}

// handler is a controller's handler: every add, update and delete enqueues the object's key
// into keys; updates of pods (or unstructured widgets) after sync are counted once enqueued.
func (u *updateCounter) handler(keys *keyQueue) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { keys.enqueue(obj) },
		UpdateFunc: func(_, newObj interface{}) {
			keys.enqueue(newObj)
			switch newObj.(type) {
			case *corev1.Pod, *unstructured.Unstructured:
				u.onUpdate()
			}
		},
		DeleteFunc: func(obj interface{}) { keys.enqueue(obj) },
	}
}
