"""JAX (jit, on the CPU or a CUDA card) on the workloads of bench/peers/workloads.py: one jitted
step per batch, parameters as a pytree, plain SGD, as d2l's JAX tab writes them. Each batch is
made on the host and handed to the step, which moves it to the device.

Run: python3 bench/peers/jax_peer.py chapter|mlp|lenet [--sync barrier|none] [--epochs N]
         [--device cpu|cuda]
"""
import time

import jax
import jax.numpy as jnp
import numpy as np

import workloads as w


def dense(key, a, b, init):
    k1, k2 = jax.random.split(key)
    if init == "uniform":  # Gluon's Uniform(0.07), ember's default
        return (jax.random.uniform(k1, (a, b), minval=-0.07, maxval=0.07),
                jax.random.uniform(k2, (b,), minval=-0.07, maxval=0.07))
    if init == "normal":  # d2l's MLP: N(0, 0.01^2)
        return 0.01 * jax.random.normal(k1, (a, b)), jnp.zeros(b)
    limit = np.sqrt(6.0 / (a + b))  # Xavier
    return jax.random.uniform(k1, (a, b), minval=-limit, maxval=limit), jnp.zeros(b)


def conv(key, cin, cout, k):
    limit = np.sqrt(6.0 / (cin * k * k + cout * k * k))
    return jax.random.uniform(key, (cout, cin, k, k), minval=-limit, maxval=limit), jnp.zeros(cout)


def mlp_forward(params, x):
    for wb in params[:-1]:
        x = jax.nn.relu(x @ wb[0] + wb[1])
    return x @ params[-1][0] + params[-1][1]


def avg_pool(x):
    return jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4.0


def lenet_forward(params, x):
    (c1, b1), (c2, b2), *dense_params = params
    dims = ("NCHW", "OIHW", "NCHW")
    x = jax.lax.conv_general_dilated(x, c1, (1, 1), ((2, 2), (2, 2)), dimension_numbers=dims)
    x = avg_pool(jax.nn.sigmoid(x + b1[None, :, None, None]))
    x = jax.lax.conv_general_dilated(x, c2, (1, 1), "VALID", dimension_numbers=dims)
    x = avg_pool(jax.nn.sigmoid(x + b2[None, :, None, None]))
    x = x.reshape(x.shape[0], -1)
    for wb in dense_params[:-1]:
        x = jax.nn.sigmoid(x @ wb[0] + wb[1])
    return x @ dense_params[-1][0] + dense_params[-1][1]


def sgd_step(forward, loss_fn, lr):
    def step(params, x, y):
        def objective(p):
            y_hat = forward(p, x)
            return loss_fn(y_hat, y), y_hat

        (l, y_hat), grads = jax.value_and_grad(objective, has_aux=True)(params)
        params = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return params, l, y_hat

    return jax.jit(step)


def warm_up(step, params, x, y):
    """Compiles the step and runs it once; its updated parameters are thrown away."""
    jax.block_until_ready(step(params, x, y))


def chapter(args):
    batch_size, lr = w.settings("chapter")
    data = w.Chapter(batch_size, args.seed)
    sizes = (w.Chapter.features,) + w.Chapter.hidden + (1,)
    keys = jax.random.split(jax.random.PRNGKey(args.seed), len(sizes) - 1)
    params = [dense(k, a, b, "uniform") for k, a, b in zip(keys, sizes, sizes[1:])]
    step = sgd_step(mlp_forward, lambda y_hat, y: 0.5 * jnp.mean((y_hat - y) ** 2), lr)
    warm_up(step, params, *data.batch())
    for epoch in range(args.epochs):
        start = time.perf_counter()
        losses = []
        for _ in range(args.batches):
            x, y = data.batch()
            params, l, _ = step(params, x, y)
            losses.append(float(l) if args.sync == "barrier" else l)
        total = float(sum(float(l) for l in losses))
        w.report(epoch, time.perf_counter() - start, total / args.batches)


def cross_entropy(y_hat, y):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(y_hat), y[:, None], axis=1))


def classify(args, images):
    batch_size, lr = w.settings(args.workload)
    train_x, train_y = w.fashion_mnist(args.dir, "train", images)
    test_x, test_y = w.fashion_mnist(args.dir, "t10k", images)
    key = jax.random.PRNGKey(args.seed)
    if images:
        k = jax.random.split(key, 5)
        params = [conv(k[0], 1, 6, 5), conv(k[1], 6, 16, 5), dense(k[2], 400, 120, "xavier"),
                  dense(k[3], 120, 84, "xavier"), dense(k[4], 84, 10, "xavier")]
        forward = lenet_forward
    else:
        k = jax.random.split(key, 2)
        params = [dense(k[0], 784, 256, "normal"), dense(k[1], 256, 10, "normal")]
        forward = mlp_forward
    step = sgd_step(forward, cross_entropy, lr)
    predict = jax.jit(lambda p, x: jnp.argmax(forward(p, x), axis=1))
    warm_up(step, params, train_x[:batch_size], train_y[:batch_size])
    rng = np.random.default_rng(args.seed)
    # The last batch of an epoch is short (60000 = 234 x 256 + 96): the first epoch compiles
    # the step once more for it, as d2l's JAX tab does.
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = rng.permutation(len(train_x))
        losses, correct, batches = [], 0, 0
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            x, y = train_x[idx], train_y[idx]
            params, l, y_hat = step(params, x, y)
            losses.append(float(l) if args.sync == "barrier" else l)
            correct = correct + jnp.sum(jnp.argmax(y_hat, axis=1) == y)
            batches += 1
        total, correct = float(sum(float(l) for l in losses)), int(correct)
        seconds = time.perf_counter() - start
        acc = float(np.mean(np.asarray(predict(params, test_x)) == test_y))
        w.report(epoch, seconds, total / batches, correct / len(order), acc)


def banner(args):
    if args.precision != "f32":
        raise SystemExit(f"jax_peer: no --precision {args.precision}: JAX has no autocast of its "
                         "own (bench/peers.py runs no JAX peer in mixed precision)")
    # Before JAX starts a backend: `--device cpu` keeps JAX off a card it would take by default.
    jax.config.update("jax_platforms", args.device)
    return f"jax {jax.__version__}, {jax.devices()}"


if __name__ == "__main__":
    w.main("JAX", banner, chapter, classify)
