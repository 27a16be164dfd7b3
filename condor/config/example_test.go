package config_test

import (
	"fmt"
	"os"

	"github.com/pond-htc/pond/condor/config"
)

func Example() {
	c, err := config.Parse("condor_config", []byte(`
use ROLE : CentralManager
use ROLE : Execute
NEGOTIATOR_INTERVAL = 5 * $(MINUTE)
START = $(START) && (KeyboardIdle > 60)
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	daemons, _ := c.Get("DAEMON_LIST")
	interval, _ := c.Int("NEGOTIATOR_INTERVAL", 60)
	start, _ := c.Get("START")
	fmt.Println(daemons)
	fmt.Println(interval)
	fmt.Println(start)
	// Output:
	// MASTER COLLECTOR NEGOTIATOR STARTD
	// 300
	// TRUE && (KeyboardIdle > 60)
}

func ExampleConfigVal() {
	c, _ := config.Parse("condor_config", []byte("CONDOR_HOST = cm.example.org\n"))
	config.ConfigVal(c, []string{"COLLECTOR_HOST", "NOT_A_KNOB"}, os.Stdout, os.Stdout)
	// Output:
	// cm.example.org
	// Not defined: NOT_A_KNOB
}
