"""What OpenNMT-tf takes from ``tensorflow_addons.optimizers``, written here.

OpenNMT-tf looks an optimizer's name up in ``tf.keras.optimizers.legacy``, then here
(``optimizer: LazyAdam`` in its automatic configurations), and adds decoupled weight decay
(Loshchilov and Hutter, 2019) to any optimizer when ``optimizer_params`` has ``weight_decay``.
Both behave as TensorFlow Addons 0.21's, with the same slot names (``m``, ``v``), so that a
checkpoint's optimizer state restores on either stack. OpenNMT-tf's trainer always hands its
optimizer accumulated, dense gradients: there LazyAdam updates exactly as Adam.
"""

import re

import tensorflow as tf

_LEGACY = tf.keras.optimizers.legacy


class LazyAdam(_LEGACY.Adam):
    """Adam whose sparse updates (embedding rows) touch only the rows of the batch: the
    moments of the other rows neither decay nor move them."""

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        amsgrad=False,
        name="LazyAdam",
        **kwargs
    ):
        if amsgrad:
            raise ValueError("LazyAdam does not support amsgrad")
        super().__init__(
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            amsgrad=False,
            name=name,
            **kwargs
        )

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        dtype = var.dtype.base_dtype
        beta_1 = self._get_hyper("beta_1", dtype)
        beta_2 = self._get_hyper("beta_2", dtype)
        step = tf.cast(self.iterations + 1, dtype)
        # The bias corrections folded into the step size, as Adam's dense update does.
        lr = (
            self._decayed_lr(dtype)
            * tf.math.sqrt(1 - tf.math.pow(beta_2, step))
            / (1 - tf.math.pow(beta_1, step))
        )
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_rows = beta_1 * tf.gather(m, indices) + (1 - beta_1) * grad
        v_rows = beta_2 * tf.gather(v, indices) + (1 - beta_2) * tf.math.square(grad)
        update = lr * m_rows / (tf.math.sqrt(v_rows) + tf.convert_to_tensor(self.epsilon, dtype))
        return tf.group(
            tf.raw_ops.ResourceScatterUpdate(resource=m.handle, indices=indices, updates=m_rows),
            tf.raw_ops.ResourceScatterUpdate(resource=v.handle, indices=indices, updates=v_rows),
            tf.raw_ops.ResourceScatterSub(resource=var.handle, indices=indices, updates=update),
        )


class DecoupledWeightDecayExtension:
    """Mixed in before an optimizer class: each update first shrinks the variable by
    ``weight_decay * variable`` (decoupled from the gradient), except for the variables whose
    name matches one of ``exclude_from_weight_decay`` (or outside ``decay_var_list``)."""

    def __init__(self, weight_decay, exclude_from_weight_decay=None, **kwargs):
        weight_decay = kwargs.pop("weight_decay", weight_decay)
        super().__init__(**kwargs)
        self._decay_var_list = None
        self._set_hyper("weight_decay", weight_decay)
        self.exclude_from_weight_decay = exclude_from_weight_decay

    def get_config(self):
        config = super().get_config()
        config.update(
            weight_decay=self._serialize_hyperparameter("weight_decay"),
            exclude_from_weight_decay=self.exclude_from_weight_decay,
        )
        return config

    def minimize(self, loss, var_list, grad_loss=None, name=None, decay_var_list=None, tape=None):
        self._set_decay_var_list(var_list, decay_var_list)
        return super().minimize(loss, var_list=var_list, grad_loss=grad_loss, name=name, tape=tape)

    def apply_gradients(self, grads_and_vars, name=None, decay_var_list=None, **kwargs):
        grads_and_vars = list(grads_and_vars)
        self._set_decay_var_list((v for _, v in grads_and_vars), decay_var_list)
        return super().apply_gradients(grads_and_vars, name=name, **kwargs)

    def _set_decay_var_list(self, var_list, decay_var_list=None):
        if decay_var_list:
            self._decay_var_list = {v.ref() for v in decay_var_list}
        elif self.exclude_from_weight_decay:
            self._decay_var_list = {
                v.ref()
                for v in var_list
                if not any(re.search(p, v.name) for p in self.exclude_from_weight_decay)
            }
        else:
            self._decay_var_list = None

    def _decays(self, var):
        return self._decay_var_list is None or var.ref() in self._decay_var_list

    def _prepare_local(self, var_device, var_dtype, apply_state):
        super()._prepare_local(var_device, var_dtype, apply_state)
        weight_decay = self._get_hyper("weight_decay", var_dtype)
        if isinstance(weight_decay, tf.keras.optimizers.schedules.LearningRateSchedule):
            weight_decay = tf.cast(weight_decay(self.iterations), var_dtype)
        apply_state[(var_device, var_dtype)]["wd_t"] = tf.identity(weight_decay)

    def _weight_decay(self, var, apply_state):
        key = (var.device, var.dtype.base_dtype)
        coefficients = (apply_state or {}).get(key) or self._fallback_apply_state(*key)
        return coefficients["wd_t"]

    def _resource_apply_dense(self, grad, var, apply_state=None):
        decay = tf.no_op()
        if self._decays(var):
            decay = var.assign_sub(self._weight_decay(var, apply_state) * var, self._use_locking)
        with tf.control_dependencies([decay]):
            return super()._resource_apply_dense(grad, var, apply_state=apply_state)

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        decay = tf.no_op()
        if self._decays(var):
            rows = -self._weight_decay(var, apply_state) * tf.gather(var, indices)
            decay = tf.raw_ops.ResourceScatterAdd(
                resource=var.handle, indices=indices, updates=rows
            )
        with tf.control_dependencies([decay]):
            return super()._resource_apply_sparse(grad, var, indices, apply_state=apply_state)


def extend_with_decoupled_weight_decay(base_optimizer):
    """:obj:`base_optimizer` (a class) with decoupled weight decay: its constructor takes
    ``weight_decay`` first."""

    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecayExtension, base_optimizer):
        def __init__(self, weight_decay, *args, **kwargs):
            super().__init__(weight_decay, *args, **kwargs)

    return OptimizerWithDecoupledWeightDecay


class AdamW(DecoupledWeightDecayExtension, _LEGACY.Adam):
    """Adam with decoupled weight decay."""

    def __init__(
        self,
        weight_decay,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        amsgrad=False,
        name="AdamW",
        **kwargs
    ):
        super().__init__(
            weight_decay,
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            amsgrad=amsgrad,
            name=name,
            **kwargs
        )
