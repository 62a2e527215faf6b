// Evaluates pods (JSON, one document per line on stdin) against the restricted Pod Security
// Standard at "latest", with the real admission library: prints "ok NAME" or the failures.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

func main() {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		panic(err)
	}
	level := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	failed := false
	for scanner.Scan() {
		var pod corev1.Pod
		if err := json.Unmarshal(scanner.Bytes(), &pod); err != nil {
			panic(err)
		}
		results := evaluator.EvaluatePod(level, &pod.ObjectMeta, &pod.Spec)
		agg := policy.AggregateCheckResults(results)
		if agg.Allowed {
			fmt.Printf("ok %s\n", pod.Name)
		} else {
			failed = true
			fmt.Printf("refused %s: %s\n", pod.Name, agg.ForbiddenDetail())
		}
	}
	if failed {
		os.Exit(1)
	}
}
