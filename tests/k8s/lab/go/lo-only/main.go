// Command lo-only is a CNI plugin for the lab: a pod's network namespace keeps nothing but its
// loopback interface (brought up by the standard "loopback" plugin, which runs before this one in
// the chain). containerd 1.6 wants an IP for the pod in the CNI result, so this plugin reports a
// made-up one in 127.1.0.0/16, derived from the container id. It creates no interface, no route
// and no traffic: pods so configured can talk to nothing but themselves.
package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

const cniVersion = "0.4.0"

type iface struct {
	Name    string `json:"name"`
	Sandbox string `json:"sandbox,omitempty"`
}

type ipConfig struct {
	Version   string `json:"version"`
	Address   string `json:"address"`
	Interface int    `json:"interface"`
}

type result struct {
	CNIVersion string     `json:"cniVersion"`
	Interfaces []iface    `json:"interfaces"`
	IPs        []ipConfig `json:"ips"`
}

func podAddress(containerID string) string {
	sum := sha256.Sum256([]byte(containerID))
	a, b := int(sum[0]), int(sum[1])
	if b == 0 {
		b = 1
	}
	if b == 255 {
		b = 254
	}
	return fmt.Sprintf("127.1.%d.%d/32", a, b)
}

func main() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	switch os.Getenv("CNI_COMMAND") {
	case "VERSION":
		fmt.Printf(`{"cniVersion":%q,"supportedVersions":["0.3.0","0.3.1","0.4.0"]}`+"\n", cniVersion)
	case "ADD":
		res := result{
			CNIVersion: cniVersion,
			Interfaces: []iface{{Name: "eth0", Sandbox: os.Getenv("CNI_NETNS")}},
			IPs:        []ipConfig{{Version: "4", Address: podAddress(os.Getenv("CNI_CONTAINERID")), Interface: 0}},
		}
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			os.Exit(1)
		}
	}
	// DEL and CHECK: nothing was created, nothing to undo or check.
}
