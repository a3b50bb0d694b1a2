"""What a documentation block assumes is already there (``model``, ``optimizer``, ``x``, ``loader``...), made on
tiny models: each setup is Python run before the block, named by the ``<!-- docs-test: setup NAME -->`` comment
above it (``tests/integration/test_docs_blocks.py``)."""

from __future__ import annotations

SETUPS = {
    "none": "",
    "keras_tiny": """
import numpy as np, keras
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)])
model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x, y = np.random.rand(256, 8).astype("float32"), np.random.randint(0, 4, 256)
""",
    "tf_loop": """
import numpy as np, tensorflow as tf, keras
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)])
optimizer = keras.optimizers.Adam()
x, y = np.random.rand(32, 8).astype("float32"), np.random.randint(0, 4, 32)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss

train_step(x, y)
""",
    "tf1_session": """
import numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
inputs = tf.compat.v1.placeholder(tf.float32, [None, 8])
w = tf.compat.v1.get_variable("dense/kernel", [8, 4])
loss = tf.reduce_sum(tf.matmul(inputs, w) ** 2)
train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss)
sess = tf.compat.v1.Session()
sess.run(tf.compat.v1.global_variables_initializer())
feed = {inputs: np.random.rand(16, 8).astype("float32")}
""",
    "torch_tiny": """
import torch
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
optimizer = torch.optim.AdamW(model.parameters())
loader = [(torch.randn(32, 8), torch.randint(0, 4, (32,))) for _ in range(6)]

def train_step(batch):
    x, y = batch
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()
""",
    "hf_tiny": """
from transformers import Trainer, TrainingArguments
from tests.corpus.pytorch import gpt2_trainer
model, dataset = gpt2_trainer.build()
args = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=8, max_steps=6, report_to=[],
                         save_strategy="no", use_cpu=True, disable_tqdm=True)
""",
    "lightning_tiny": """
import lightning
from tests.corpus.pytorch import lightning_cnn
model, loader = lightning_cnn.build()
""",
    "flax_nnx": """
import jax, optax
from flax import nnx

class CNN(nnx.Module):
    def __init__(self, rngs):
        self.conv1 = nnx.Conv(1, 8, (3, 3), rngs=rngs)
        self.bn = nnx.BatchNorm(8, rngs=rngs)
        self.head = nnx.Linear(8 * 28 * 28, 10, rngs=rngs)

    def __call__(self, x):
        return self.head(nnx.relu(self.bn(self.conv1(x))).reshape(x.shape[0], -1))

@nnx.jit
def train_step(model, optimizer, x, y):
    loss_fn = lambda m: optax.softmax_cross_entropy_with_integer_labels(m(x), y).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss

x, y = jax.numpy.ones((16, 28, 28, 1)), jax.numpy.zeros((16,), "int32")
""",
    "jax_step": """
import jax, jax.numpy as jnp
params = {"w": jnp.ones((8, 4))}
batch = jnp.ones((16, 8))

@jax.jit
def step(params, batch):
    grads = jax.grad(lambda p: jnp.sum((batch @ p["w"]) ** 2))(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
""",
}
