"""The trainer's half of a recipe, as its source script does it: the
optimiser (with its weight-decay groups), the learning rate by epoch and
step, the model EMA, the loss, BlurPool. Settings come from
tensorcom.reference_flags (torchvision's, timm's or FFCV's flags).

Learning rates are a function of (epoch, step): nothing to checkpoint, and
a resumed run continues on the same curve.
"""

import math

import torch
import torch.nn.functional as F

# --- optimiser ----------------------------------------------------------------------


def parameter_groups(model, settings):
    """The parameters in weight-decay groups as the source script makes them."""
    wd = settings.weight_decay
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if settings.script == "torchvision" and settings.norm_weight_decay is not None:
        norms = {id(p) for m in model.modules() if isinstance(m, NORM_LAYERS) for p in m.parameters(recurse=False)}
        return _groups(named, lambda name, p: id(p) in norms, settings.norm_weight_decay, wd)
    if settings.script == "timm" and wd:
        # timm's optimiser factory: no decay on biases and 1-D parameters.
        return _groups(named, lambda name, p: p.ndim <= 1 or name.endswith(".bias"), 0.0, wd)
    if settings.script == "ffcv":
        return _groups(named, lambda name, p: "bn" in name, 0.0, wd)  # FFCV: its parameter names with "bn"
    return [{"params": [p for _, p in named], "weight_decay": wd}]


NORM_LAYERS = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm,
               torch.nn.modules.instancenorm._InstanceNorm, torch.nn.LocalResponseNorm)


def _groups(named, exempt, exempt_wd, wd):
    special = [p for name, p in named if exempt(name, p)]
    rest = [p for name, p in named if not exempt(name, p)]
    return [g for g in ({"params": special, "weight_decay": exempt_wd}, {"params": rest, "weight_decay": wd})
            if g["params"]]


def make_optimizer(model, settings):
    groups = parameter_groups(model, settings)
    lr, momentum, opt = settings.lr, settings.momentum, settings.opt
    if opt in ("sgd", "sgd_nesterov", "nesterov"):
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=opt != "sgd")
    if opt == "adamw":
        return torch.optim.AdamW(groups, lr=lr)
    if opt == "rmsprop":  # torchvision's settings
        return torch.optim.RMSprop(groups, lr=lr, momentum=momentum, eps=0.0316, alpha=0.9)
    return Lamb(groups, lr=lr)


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al., arXiv:1904.00962) as timm's Lamb and NVIDIA's
    FusedLAMB run it: gradients clipped to a global norm (1.0) first, Adam's
    moments with bias correction, L2 weight decay added to the update, and
    the update scaled by ||w|| / ||update|| (1 where either is 0) only for
    parameters with weight decay."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.max_grad_norm = max_grad_norm

    def _clip_divisor(self):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads or self.max_grad_norm is None:
            return None
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        return (norm / self.max_grad_norm).clamp(min=1.0)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        divisor = self._clip_divisor()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            group["step"] = group.get("step", 0) + 1
            correction1 = 1 - beta1 ** group["step"]
            correction2 = 1 - beta2 ** group["step"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad if divisor is None else p.grad / divisor
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = (m / correction1) / ((v.sqrt() / math.sqrt(correction2)).add_(group["eps"]))
                if group["weight_decay"] != 0:
                    update.add_(p, alpha=group["weight_decay"])
                    w_norm, u_norm = p.norm(2.0), update.norm(2.0)
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                    update.mul_(ratio)
                p.add_(update, alpha=-group["lr"])
        return loss


# --- learning rate ------------------------------------------------------------------


def learning_rate(settings, epochs, epoch, step, steps):
    """The learning rate of step `step` (of `steps`) in epoch `epoch` (from
    0) of an `epochs`-epoch run. torchvision's and timm's schedulers move
    once an epoch; FFCV's moves every step."""
    lr, script = settings.lr, settings.script
    if script == "torchvision":
        return lr * _torchvision_factor(settings, epochs, epoch)
    if script == "timm":
        return _timm_rate(settings, epochs, epoch)
    # FFCV: each step interpolated between its epoch's rate and the next's.
    start, end = _ffcv_rate(settings, epochs, epoch), _ffcv_rate(settings, epochs, epoch + 1)
    return start + (end - start) * step / max(steps, 1)


def _ffcv_rate(s, epochs, epoch):
    """FFCV's get_cyclic_lr (1e-4 x lr up to lr at lr_peak_epoch, then down
    to 0 at the last epoch) or get_step_lr, at the start of `epoch`."""
    if s.sched == "step":
        return 0.0 if epoch >= epochs else s.lr * s.gamma ** (epoch // s.step_size)
    xs, ys = (0.0, s.lr_peak_epoch, float(epochs)), (1e-4 * s.lr, s.lr, 0.0)
    if epoch <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if epoch <= x1 and x1 > x0:
            return y0 + (y1 - y0) * (epoch - x0) / (x1 - x0)
    return ys[-1]


def _torchvision_factor(s, epochs, epoch):
    """SequentialLR of the warm-up (LinearLR or ConstantLR) and the main
    scheduler, which starts from the base rate at the milestone."""
    warm = s.warmup_epochs
    if epoch < warm:
        if s.warmup_method == "linear":
            return s.warmup_decay + (1 - s.warmup_decay) * epoch / warm
        return s.warmup_decay
    t = epoch - warm
    if s.sched == "steplr":
        return s.gamma ** (t // s.step_size)
    if s.sched == "exponentiallr":
        return s.gamma ** t
    span = max(epochs - warm, 1)  # CosineAnnealingLR(T_max=epochs - warm-up, eta_min=lr_min)
    return (s.min_lr + (s.lr - s.min_lr) * (1 + math.cos(math.pi * t / span)) / 2) / s.lr


def _timm_rate(s, epochs, epoch):
    """timm's CosineLRScheduler / StepLRScheduler stepped by epoch: the
    warm-up overlays the first epochs of the curve (warmup_prefix off)."""
    if epoch < s.warmup_epochs:
        return s.warmup_lr + epoch * (s.lr - s.warmup_lr) / s.warmup_epochs
    if s.sched == "none":
        return s.lr
    if s.sched == "step":
        return s.lr * s.gamma ** (epoch // s.step_size)
    if epoch >= epochs:
        return s.min_lr
    return s.min_lr + 0.5 * (s.lr - s.min_lr) * (1 + math.cos(math.pi * epoch / epochs))


# --- model EMA ----------------------------------------------------------------------


class ModelEma:
    """An exponential moving average of the weights and buffers.

    torchvision: updated every model_ema_steps steps of an epoch with
    decay 1 - min(1, (1 - d) x world x batch x steps / epochs), and reset to
    the weights during the warm-up epochs. timm: updated every step with
    decay d."""

    def __init__(self, model, settings, world, batch, epochs):
        self.model = _copy(model)
        if settings.script == "torchvision":
            alpha = min(1.0, (1.0 - settings.model_ema_decay) * world * batch * settings.model_ema_steps / epochs)
            self.decay, self.every, self.warmup = 1.0 - alpha, settings.model_ema_steps, settings.warmup_epochs
        else:
            self.decay, self.every, self.warmup = settings.model_ema_decay, 1, 0
        self.updates = 0

    @torch.no_grad()
    def after_step(self, model, epoch, step):
        """Called after the optimiser's step `step` (from 0) of epoch `epoch`."""
        if step % self.every:
            return
        first = self.updates == 0
        for mine, theirs in zip(self.model.state_dict().values(), model.state_dict().values()):
            if first or not mine.is_floating_point():
                mine.copy_(theirs)
            else:
                mine.mul_(self.decay).add_(theirs.detach(), alpha=1 - self.decay)
        # torchvision starts the average afresh after each warm-up update.
        self.updates = 0 if epoch < self.warmup else self.updates + 1

    def state_dict(self):
        return {"model": self.model.state_dict(), "updates": self.updates}

    def load_state_dict(self, state):
        self.model.load_state_dict(state["model"])
        self.updates = state["updates"]


def _copy(model):
    import copy
    twin = copy.deepcopy(model)
    for p in twin.parameters():
        p.requires_grad_(False)
    return twin.eval()


# --- loss ---------------------------------------------------------------------------


class RecipeLoss:
    """Cross-entropy with label smoothing, or timm's BinaryCrossEntropy
    (--bce-loss: smoothing into the one-hot targets, optionally made 0/1
    above a threshold, the mean over every logit). Soft targets (mixed
    batches) come with the smoothing already in them."""

    def __init__(self, settings, classes):
        self.bce = bool(settings.bce_loss)
        self.smoothing, self.classes = settings.label_smoothing or 0.0, classes
        self.threshold = settings.bce_target_thresh

    def soft_target_smoothing(self):
        """The smoothing mixed targets are made with (timm folds it in)."""
        return self.smoothing

    def __call__(self, logits, targets):
        logits = logits.float()
        if not self.bce:
            if targets.is_floating_point():
                return F.cross_entropy(logits, targets)
            return F.cross_entropy(logits, targets, label_smoothing=self.smoothing)
        if not targets.is_floating_point():
            off = self.smoothing / self.classes
            dense = torch.full_like(logits, off)
            targets = dense.scatter_(1, targets.view(-1, 1), 1.0 - self.smoothing + off)
        if self.threshold is not None:
            targets = targets.gt(self.threshold).to(targets.dtype)
        return F.binary_cross_entropy_with_logits(logits, targets)


# --- model --------------------------------------------------------------------------


class BlurPoolConv2d(torch.nn.Module):
    """FFCV's BlurPool: a [1 2 1] x [1 2 1] / 16 blur of each channel before
    a strided convolution."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv
        kernel = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]) / 16.0
        self.register_buffer("blur_filter", kernel.expand(conv.in_channels, 1, 3, 3).clone())

    def forward(self, x):
        blurred = F.conv2d(x, self.blur_filter.to(x.dtype), padding=1, groups=self.conv.in_channels)
        return self.conv(blurred)


def add_blurpool(module):
    """Wraps each convolution of stride > 1 and at least 16 input channels, as FFCV does."""
    for name, child in module.named_children():
        if isinstance(child, torch.nn.Conv2d) and max(child.stride) > 1 and child.in_channels >= 16:
            setattr(module, name, BlurPoolConv2d(child))
        else:
            add_blurpool(child)
    return module
