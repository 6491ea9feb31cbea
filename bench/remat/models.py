"""The models of gradc's rematerialization benchmark, written as Relay text.

Each function returns the text of one @main whose gradient bench/remat/run.py
compiles: uniform tanh(dense) chains, an MLP, a VGG-like and a ResNet-like
conv net (batch norm with the batch's statistics), a stack of transformer
blocks, and an RNN unrolled over time without scan.
"""

HEADER = '#[version = "0.0.5"]\n'


def _main(params, body, result, ret="float32"):
    sig = ",\n          ".join("%%%s: Tensor[(%s), %s]" % (n, ", ".join(map(str, s)), t) for n, s, t in params)
    return HEADER + "def @main(%s) -> %s {\n%s  %s\n}\n" % (sig, ret, "".join("  %s;\n" % line for line in body), result)


def chain(layers, batch=32, width=128):
    """A uniform chain: x -> tanh(dense) -> ... (the model of test/remat)."""
    params = [("x", (batch, width), "float32")] + [("w%d" % i, (width, width), "float32") for i in range(layers)]
    body, prev = [], "%x"
    for i in range(layers):
        body.append("%%%d = tanh(nn.dense(%s, %%w%d, units=%d))" % (i, prev, i, width))
        prev = "%%%d" % i
    return _main(params, body, "sum(%s)" % prev)


def mlp(layers=8, batch=64, width=512, inputs=784, classes=10):
    params = [("x", (batch, inputs), "float32"), ("y", (batch,), "int64")]
    body, prev, fan = [], "%x", inputs
    for i in range(layers):
        params += [("w%d" % i, (width, fan), "float32"), ("b%d" % i, (width,), "float32")]
        body.append("%%%d = nn.relu(nn.bias_add(nn.dense(%s, %%w%d, units=%d), %%b%d))" % (i, prev, i, width, i))
        prev, fan = "%%%d" % i, width
    params += [("wo", (classes, width), "float32")]
    body.append("%%out = nn.log_softmax(nn.dense(%s, %%wo, units=%d))" % (prev, classes))
    return _main(params, body, "nn.nll_loss(%out, %y)")


def _conv_bn_relu(body, params, name, src, cin, cout, relu=True):
    params += [("%s_w" % name, (cout, cin, 3, 3), "float32"), ("%s_g" % name, (cout,), "float32"),
               ("%s_b" % name, (cout,), "float32")]
    body.append("%%%s_c = nn.conv2d(%s, %%%s_w, padding=[1, 1], channels=%d, kernel_size=[3, 3])" % (name, src, name, cout))
    body.append("%%%s_n = nn.batch_norm(%%%s_c, %%%s_g, %%%s_b, mean(%%%s_c, axis=[0, 2, 3]), variance(%%%s_c, axis=[0, 2, 3]))"
                % ((name,) * 6))
    out = "%%%s_n.0" % name
    if relu:
        body.append("%%%s = nn.relu(%s)" % (name, out))
        return "%%%s" % name
    return out


def vgg(batch=8, size=32, widths=(16, 32, 64), classes=10):
    params = [("x", (batch, 3, size, size), "float32"), ("y", (batch,), "int64")]
    body, prev, cin = [], "%x", 3
    for s, c in enumerate(widths):
        prev = _conv_bn_relu(body, params, "s%da" % s, prev, cin, c)
        prev = _conv_bn_relu(body, params, "s%db" % s, prev, c, c)
        body.append("%%p%d = nn.max_pool2d(%s, pool_size=[2, 2], strides=[2, 2])" % (s, prev))
        prev, cin, size = "%%p%d" % s, c, size // 2
    params += [("wo", (classes, cin * size * size), "float32")]
    body.append("%%out = nn.log_softmax(nn.dense(nn.batch_flatten(%s), %%wo, units=%d))" % (prev, classes))
    return _main(params, body, "nn.nll_loss(%out, %y)")


def resnet(batch=8, size=32, width=32, blocks=8, classes=10):
    params = [("x", (batch, 3, size, size), "float32"), ("y", (batch,), "int64")]
    body = []
    prev = _conv_bn_relu(body, params, "stem", "%x", 3, width)
    for b in range(blocks):
        h = _conv_bn_relu(body, params, "r%da" % b, prev, width, width)
        h = _conv_bn_relu(body, params, "r%db" % b, h, width, width, relu=False)
        body.append("%%r%d = nn.relu(%s + %s)" % (b, h, prev))
        prev = "%%r%d" % b
    params += [("wo", (classes, width), "float32")]
    body.append("%%out = nn.log_softmax(nn.dense(nn.batch_flatten(nn.global_avg_pool2d(%s)), %%wo, units=%d))"
                % (prev, classes))
    return _main(params, body, "nn.nll_loss(%out, %y)")


def transformer(blocks=4, batch=4, seq=32, width=64, heads=4, hidden=256):
    d = width // heads
    tokens = batch * seq
    params = [("x", (tokens, width), "float32"), ("mask", (seq, seq), "float32")]
    body, prev = [], "%x"
    for b in range(blocks):
        p = "b%d_" % b
        params += [(p + "g1", (width,), "float32"), (p + "c1", (width,), "float32"),
                   (p + "wqkv", (3 * width, width), "float32"), (p + "wo", (width, width), "float32"),
                   (p + "g2", (width,), "float32"), (p + "c2", (width,), "float32"),
                   (p + "w1", (hidden, width), "float32"), (p + "w2", (width, hidden), "float32")]
        def heads_of(v):
            return "reshape(transpose(reshape(%s, newshape=[%d, %d, %d, %d]), axes=[0, 2, 1, 3]), newshape=[%d, %d, %d])" % (
                v, batch, seq, heads, d, batch * heads, seq, d)
        body.append("%%%sln1 = nn.layer_norm(%s, %%%sg1, %%%sc1)" % (p, prev, p, p))
        body.append("%%%sqkv = split(nn.dense(%%%sln1, %%%swqkv), indices_or_sections=3, axis=-1)" % (p, p, p))
        body.append("%%%satt = nn.softmax(nn.batch_matmul(%s, %s) * %gf + %%mask, axis=-1)" % (
            p, heads_of("%%%sqkv.0" % p), heads_of("%%%sqkv.1" % p), 1 / d ** 0.5))
        body.append("%%%sy = nn.batch_matmul(%%%satt, %s, transpose_b=False)" % (p, p, heads_of("%%%sqkv.2" % p)))
        body.append("%%%sh = %s + nn.dense(reshape(transpose(reshape(%%%sy, newshape=[%d, %d, %d, %d]), axes=[0, 2, 1, 3]), "
                    "newshape=[%d, %d]), %%%swo)" % (p, prev, p, batch, heads, seq, d, tokens, width, p))
        body.append("%%%sln2 = nn.layer_norm(%%%sh, %%%sg2, %%%sc2)" % (p, p, p, p))
        body.append("%%%sout = %%%sh + nn.dense(nn.gelu(nn.dense(%%%sln2, %%%sw1)), %%%sw2)" % (p, p, p, p, p))
        prev = "%%%sout" % p
    return _main(params, body, "sum(%s * %s)" % (prev, prev))


def rnn(steps=32, batch=32, inputs=64, hidden=128):
    params = [("x", (steps, batch, inputs), "float32"), ("h0", (batch, hidden), "float32"),
              ("wx", (hidden, inputs), "float32"), ("wh", (hidden, hidden), "float32"), ("b", (hidden,), "float32")]
    body, prev = [], "%h0"
    for t in range(steps):
        x_t = "reshape(strided_slice(%%x, begin=[%d, 0, 0], end=[%d, %d, %d]), newshape=[%d, %d])" % (
            t, t + 1, batch, inputs, batch, inputs)
        body.append("%%h%d = tanh(nn.bias_add(nn.dense(%s, %%wx, units=%d) + nn.dense(%s, %%wh, units=%d), %%b))" % (
            t + 1, x_t, hidden, prev, hidden))
        prev = "%%h%d" % (t + 1)
    return _main(params, body, "sum(%s * %s)" % (prev, prev))


def residual_small():
    """Small enough for an exhaustive search over keep sets (8 kernels)."""
    params = [("x", (256, 32), "float32")] + [("w%d" % i, (32, 32), "float32") for i in range(8)]
    body = ["%0 = tanh(nn.dense(%x, %w0, units=32))", "%1 = tanh(nn.dense(%0, %w1, units=32))",
            "%2 = tanh(nn.dense(%1, %w2, units=32)) + %0", "%3 = tanh(nn.dense(%2, %w3, units=32))",
            "%4 = tanh(nn.dense(%3, %w4, units=32)) + %2", "%5 = tanh(nn.dense(%4, %w5, units=32))",
            "%6 = tanh(nn.dense(%5, %w6, units=32)) + %x", "%7 = tanh(nn.dense(%6, %w7, units=32))"]
    return _main(params, body, "sum(%7 * %3)")


MODELS = {
    "chain16": lambda: chain(16),
    "chain64": lambda: chain(64),
    "chain256": lambda: chain(256),
    "chain1024": lambda: chain(1024),
    "residual-small": residual_small,
    "mlp": mlp,
    "vgg": vgg,
    "resnet": resnet,
    "transformer": transformer,
    "rnn-unrolled": rnn,
}
