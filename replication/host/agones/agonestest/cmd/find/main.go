// Command find prints where the Agones sidecar for the tests is (see
// agonestest.Binary) and exits 0, or prints why there is none and exits 1.
// .ci/run uses it to say whether the Agones tests run.
package main

import (
	"fmt"
	"os"

	"github.com/archenet/archenet/replication/host/agones/agonestest"
)

func main() {
	bin, why := agonestest.Binary()
	if bin == "" {
		fmt.Println(why)
		os.Exit(1)
	}
	fmt.Println(bin)
}
