#!/usr/bin/env bash
# Switches the Dynamo frontend's routing mode (DYN_ROUTER_MODE) and waits for
# the frontend to roll out, for `kvlens sweep --mode-switch-cmd`:
#
#   kvlens sweep --target http://llama-70b-frontend:8000/v1 --modes round_robin,kv \
#     --mode-switch-cmd 'deploy/k8s/overlays/dynamo/switch-mode.sh {mode}'
#
# kvlens then waits until the frontend answers /v1/models before measuring.
# Environment: DGD (default llama-70b), NAMESPACE (default: kubectl's current).
set -euo pipefail
mode=${1:?usage: switch-mode.sh round_robin|random|kv}
case "$mode" in
round_robin | random | kv) ;;
*)
	echo "switch-mode.sh: Dynamo has no router mode \"$mode\" (round_robin, random or kv)" >&2
	exit 2
	;;
esac
dgd=${DGD:-llama-70b}
ns=()
[ -n "${NAMESPACE:-}" ] && ns=(-n "$NAMESPACE")
# envs[0] of the Frontend service is DYN_ROUTER_MODE in dynamographdeployment.yaml.
kubectl "${ns[@]}" patch dynamographdeployment "$dgd" --type=json \
	-p "[{\"op\":\"test\",\"path\":\"/spec/services/Frontend/envs/0/name\",\"value\":\"DYN_ROUTER_MODE\"},{\"op\":\"replace\",\"path\":\"/spec/services/Frontend/envs/0/value\",\"value\":\"$mode\"}]"
kubectl "${ns[@]}" rollout status "deployment/$dgd-frontend" --timeout=15m
