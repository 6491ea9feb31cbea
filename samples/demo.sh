#!/usr/bin/env bash
# The main job on the samples: install what is missing, build gradc, compile
# samples/mlp.relay, samples/cnn.relay, samples/transformer.relay,
# samples/rnn.relay and samples/lstm.relay with their gradients to objects and
# to PTX, link each C driver with its object, and run a few training steps.
# Then from PyTorch: export a CNN and a transformer block to ONNX
# (samples/pytorch_export.py), import them, compile each with the gradient
# of every weight, and check loss and gradients against PyTorch autograd.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/install-deps.sh"
bash "$root/tools/build.sh"
out="$root/build/demo"
mkdir -p "$out"
cd "$out"
gradc="$root/build/gradc"
set -x
"$gradc" compile "$root/samples/mlp.relay" --grad --wrt=%w1,%b1,%w2,%b2 -o mlp --report
"$gradc" compile "$root/samples/mlp.relay" --grad --wrt=%w1,%b1,%w2,%b2 --target=cuda --gpu-arch=sm_90 -o mlp_cuda
cc -O2 -std=c11 -I. "$root/samples/mlp_app.c" mlp.o -lm -o mlp_app
cnn_wrt=%w1,%g1,%b1,%w2,%g2,%b2,%w3,%b3,%w4,%b4
"$gradc" compile "$root/samples/cnn.relay" --grad --wrt=$cnn_wrt -o cnn --report
"$gradc" compile "$root/samples/cnn.relay" --grad --wrt=$cnn_wrt --target=cuda --gpu-arch=sm_90 -o cnn_cuda
cc -O2 -std=c11 -I. "$root/samples/cnn_app.c" cnn.o -lm -o cnn_app
gpt_wrt=%E,%P,%ln1_g,%ln1_b,%Wqkv,%bqkv,%Wo,%bo,%ln2_g,%ln2_b,%W1,%b1,%W2,%b2
"$gradc" compile "$root/samples/transformer.relay" --grad --wrt=$gpt_wrt -o transformer --report
"$gradc" compile "$root/samples/transformer.relay" --grad --wrt=$gpt_wrt --target=cuda --gpu-arch=sm_90 -o transformer_cuda
cc -O2 -std=c11 -I. "$root/samples/transformer_app.c" transformer.o -lm -o transformer_app
rnn_wrt=%E,%Wx,%Wh,%b,%Wo,%bo
"$gradc" compile "$root/samples/rnn.relay" --grad --wrt=$rnn_wrt -o rnn --report
"$gradc" compile "$root/samples/rnn.relay" --grad --wrt=$rnn_wrt --target=cuda --gpu-arch=sm_90 -o rnn_cuda
cc -O2 -std=c11 -I. "$root/samples/rnn_app.c" rnn.o -lm -o rnn_app
lstm_wrt=%W_ih,%W_hh,%b,%Wc,%bc
"$gradc" compile "$root/samples/lstm.relay" --grad --wrt=$lstm_wrt -o lstm --report
"$gradc" compile "$root/samples/lstm.relay" --grad --wrt=$lstm_wrt --target=cuda --gpu-arch=sm_90 -o lstm_cuda
cc -O2 -std=c11 -I. "$root/samples/lstm_app.c" lstm.o -lm -o lstm_app
{ set +x; } 2>/dev/null
ls -l mlp.o mlp.h mlp.json mlp_cuda.ptx mlp_cuda.o cnn.o cnn.h cnn_cuda.ptx transformer.o transformer.h transformer_cuda.ptx \
  rnn.o rnn.h rnn_cuda.ptx lstm.o lstm.h lstm_cuda.ptx
if command -v ptxas >/dev/null || [ -x /usr/local/cuda/bin/ptxas ]; then
  for ptx in mlp_cuda.ptx cnn_cuda.ptx transformer_cuda.ptx rnn_cuda.ptx lstm_cuda.ptx; do
    "$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)" -arch=sm_90 $ptx -o /dev/null && echo "ptxas -arch=sm_90 $ptx: ok"
  done
fi
./mlp_app
./cnn_app
./transformer_app
./rnn_app
./lstm_app
set -x
/usr/bin/python3 "$root/samples/pytorch_export.py" pytorch 2>/dev/null
"$gradc" import pytorch/cnn.onnx -o pytorch/cnn
"$gradc" compile pytorch/cnn.relay --grad -o pytorch/cnn --report
"$gradc" compile pytorch/transformer.onnx --grad -o pytorch/transformer
{ set +x; } 2>/dev/null
/usr/bin/python3 "$root/test/import/Inputs/check_pytorch_grads.py" "$gradc" pytorch cnn transformer mlp attention
# The fused training step: scikit-learn's digits trained from C by one call
# per batch (Adam, in place), loss and test accuracy per epoch, curves in a PNG.
bash "$root/samples/digits/run.sh" "$gradc" digits 12
