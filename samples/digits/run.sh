#!/usr/bin/env bash
# The digits sample end to end: write scikit-learn's digits to .npy, compile
# the CNN with its fused Adam training step, build the C trainer, train for a
# few epochs (loss and test accuracy per epoch), draw the curves to a PNG.
# Usage: run.sh GRADC WORKDIR [EPOCHS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gradc="$1"; work="$2"; epochs="${3:-12}"
mkdir -p "$work"
cd "$work"
/usr/bin/python3 "$here/prepare.py" data
"$gradc" compile "$here/digits.relay" --train='adam(lr=0.003)' --wrt=%w1,%g1,%b1,%w2,%b2,%w3,%b3 -o digits
cc -O2 -std=c11 -D_DEFAULT_SOURCE -Wall -Werror -I. "$here/train.c" digits.o -lm -lpthread -o train
./train data "$epochs" curves.csv
/usr/bin/python3 "$here/plot.py" curves.csv digits_curves.png
