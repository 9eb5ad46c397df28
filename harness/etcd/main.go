// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3's own entry point),
// built from the pinned module so that the harness needs no distribution package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
