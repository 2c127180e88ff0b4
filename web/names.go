package web

import (
	"regexp"
	"strings"

	"github.com/kvlens/kvlens/baselines"
)

// Names on the page say which router made a figure and where it comes
// from, so that a stored curve of Dynamo's router on hardware is never
// mistaken for kvlens's own policy on simulated workers:
//
//	Dynamo 0.9 KV router · 3×H200 · measured   (a stored curve)
//	round-robin · 3×H200 · measured            (a stored curve)
//	kvlens kv · simulated                      (a live lane)

// RouterName names the router a kvlens policy is, as buttons, legends and
// curves say it: the policies that score KV overlap carry kvlens's name,
// and the replicas of other routers say whose rule they copy.
func RouterName(policy string) string {
	switch policy {
	case "round_robin":
		return "round-robin"
	case "least_loaded":
		return "least-loaded"
	case "random":
		return "random"
	case "kv":
		return "kvlens kv"
	case "kv_approx":
		return "kvlens kv (approximate)"
	case "dynamo":
		return "kvlens copy of Dynamo 0.9's cost"
	case "dynamo_latest":
		return "kvlens copy of Dynamo's latest cost"
	case "dynamo_tuned":
		return "kvlens copy of Dynamo's latest cost, tuned"
	case "sglang":
		return "kvlens copy of SGLang's cache-aware router"
	case "sglang_events":
		return "kvlens copy of SGLang's cache-aware router with KV events"
	case "llmd":
		return "kvlens copy of llm-d's scorers"
	}
	return policy
}

// ShortName is the name a policy select shows: its router, short enough
// for the select's 13em at most (web/static/app.css), where RouterName's
// "kvlens copy of Dynamo 0.9's cost" was cut to "kvlens copy of D" at
// 11em. The option's title gives the full name.
func ShortName(policy string) string {
	switch policy {
	case "kv_approx":
		return "kvlens kv approx."
	case "dynamo":
		return "Dynamo 0.9 copy"
	case "dynamo_latest":
		return "Dynamo latest copy"
	case "dynamo_tuned":
		return "Dynamo tuned copy"
	case "sglang":
		return "SGLang copy"
	case "sglang_events":
		return "SGLang events copy"
	case "llmd":
		return "llm-d copy"
	}
	return RouterName(policy)
}

// laneName is a live lane's full name: its router and its source, such as
// "kvlens kv · simulated".
func (s *Server) laneName(policy string) string {
	return RouterName(policy) + " · " + or(s.opts.Source, "live")
}

var (
	// gpus finds a fleet in a deployment's description, such as "3× H200".
	gpus = regexp.MustCompile(`(\d+)\s*[×x]\s*([A-Z]+\d+[A-Za-z]*)`)
	// dynamoVersion finds the Dynamo release a deployment ran.
	dynamoVersion = regexp.MustCompile(`Dynamo (\d+\.\d+)`)
)

// simulatedSet says whether a stored set was measured on kvlens's
// simulated workers rather than on hardware: every set kvlens sweeps
// against them says so in its deployment.
func simulatedSet(set *baselines.Set) bool {
	return strings.Contains(strings.ToLower(set.Deployment), "simulated")
}

// CurveName names a stored curve: the router that made it, the fleet and
// whether it was measured or simulated, such as "Dynamo 0.9 KV router ·
// 3×H200 · measured".
func CurveName(set *baselines.Set, mode string) string {
	if set == nil {
		return RouterName(mode)
	}
	return CurveRouter(set, mode) + " · " + CurveSource(set)
}

// CurveRouter names the router that made a stored curve: a measured set
// that ran Dynamo names Dynamo's router for its KV mode; a simulated set
// ran kvlens's own policy.
func CurveRouter(set *baselines.Set, mode string) string {
	router := RouterName(mode)
	if set == nil || simulatedSet(set) {
		return router
	}
	if m := dynamoVersion.FindStringSubmatch(set.Deployment); m != nil {
		if BaselineMode(mode) == "kv" {
			return "Dynamo " + m[1] + " KV router"
		}
		return strings.TrimPrefix(router, "kvlens ")
	}
	if mode == "kv" {
		return "KV router"
	}
	return router
}

// CurveSource says where a stored set's figures come from: "simulated", or
// the fleet measured, such as "3×H200 · measured".
func CurveSource(set *baselines.Set) string {
	if simulatedSet(set) {
		return "simulated"
	}
	if m := gpus.FindStringSubmatch(set.Deployment); m != nil {
		return m[1] + "×" + m[2] + " · measured"
	}
	return "measured"
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
