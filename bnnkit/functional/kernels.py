"""GPyTorch kernels for the functional prior, built from short spec strings.

Names (``d`` the input dimension, ``r = ||(x - x') / l||`` with one lengthscale per dimension
under ARD)::

    rbf        s exp(-r^2 / 2)                                   ScaleKernel(RBFKernel)
    matern12   s exp(-r)                                         ScaleKernel(MaternKernel(nu=0.5))
    matern32   s (1 + sqrt(3) r) exp(-sqrt(3) r)                 ScaleKernel(MaternKernel(nu=1.5))
    matern52   s (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)     ScaleKernel(MaternKernel(nu=2.5))
    periodic   s exp(-2 sum_j sin^2(pi |x_j - x'_j| / p_j) / l_j)     ScaleKernel(PeriodicKernel)
    linear     sum_j v_j x_j x'_j                                DenseLinearKernel (v is its own scale)
    constant   c  (a bias; "linear+constant" is the affine kernel) ConstantKernel

(GPyTorch's periodic kernel divides by ``l``, not ``l^2``: its lengthscale is the square of MacKay's.)

Sums and products are written with ``+`` and ``*`` (``*`` binds tighter): ``"rbf+linear"``,
``"rbf*periodic+linear"``.  A product term gets one outputscale ``s`` for the whole product
(``ScaleKernel(RBF * Periodic)``) rather than one per factor, which would not be identifiable;
a term that contains ``linear`` or ``constant`` takes its scale from that factor instead.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least

try:
    import gpytorch
    from gpytorch.kernels import Kernel
except ImportError as exc:  # pragma: no cover - gpytorch is an optional dependency
    raise ImportError(
        "bnnkit.functional needs gpytorch for its Gaussian-process prior: pip install 'bnnkit[gp]'."
    ) from exc

KERNEL_NAMES = ("rbf", "matern12", "matern32", "matern52", "linear", "periodic", "constant")
_MATERN_NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}
_SELF_SCALED = ("linear", "constant")  # factors that carry their own scale parameter

# Public hyperparameter name -> (attribute on the gpytorch module, test for the module).
HYPERPARAMETERS: dict[str, tuple[str, type]] = {
    "lengthscale": ("lengthscale", Kernel),
    "outputscale": ("outputscale", gpytorch.kernels.ScaleKernel),
    "variance": ("variance", gpytorch.kernels.LinearKernel),
    "period": ("period_length", gpytorch.kernels.PeriodicKernel),
    "bias": ("constant", gpytorch.kernels.ConstantKernel),
}


class DenseLinearKernel(gpytorch.kernels.LinearKernel):
    """GPyTorch's :class:`~gpytorch.kernels.LinearKernel` with a dense output.

    For ``x1 == x2`` the parent returns a low-rank root operator; adding that to a dense kernel
    matrix (``"rbf+linear"``) makes linear_operator Cholesky-factorise the dense summand (with its
    own jitter) on every call.  Dense ``M x M`` matrices are what the prior needs anyway.
    """

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        out = super().forward(x1, x2, diag=diag, **params)
        return out.to_dense() if hasattr(out, "to_dense") else out


def _base(name: str, ard_dims: int | None) -> Kernel:
    # Pass ard_num_dims only when set: PeriodicKernel cannot take ard_num_dims=None.
    ard = {} if ard_dims is None else {"ard_num_dims": ard_dims}
    if name == "rbf":
        k = gpytorch.kernels.RBFKernel(**ard)
    elif name in _MATERN_NU:
        k = gpytorch.kernels.MaternKernel(nu=_MATERN_NU[name], **ard)
    elif name == "periodic":
        k = gpytorch.kernels.PeriodicKernel(**ard)
    elif name == "linear":
        k = DenseLinearKernel(**ard)
    else:
        k = gpytorch.kernels.ConstantKernel()
    k._bnnkit_name = name
    return k


def _term(factors: list[str], ard_dims: int | None) -> Kernel:
    bases = [_base(f, ard_dims) for f in factors]
    k = bases[0] if len(bases) == 1 else gpytorch.kernels.ProductKernel(*bases)
    label = "*".join(factors)
    k._bnnkit_name = label
    if any(f in _SELF_SCALED for f in factors):
        return k
    scaled = gpytorch.kernels.ScaleKernel(k)
    scaled._bnnkit_name = label
    return scaled


def parse_spec(spec: str) -> list[list[str]]:
    """Split ``"a*b+c"`` into ``[["a", "b"], ["c"]]`` (sum of products), checking every name."""
    if not isinstance(spec, str) or not spec.strip():
        raise BnnkitError(
            f"kernel spec must be a non-empty string of {', '.join(KERNEL_NAMES)} joined by '+' or '*', "
            f"got {spec!r}."
        )
    terms = []
    for term in spec.lower().replace(" ", "").split("+"):
        factors = term.split("*")
        for f in factors:
            if f not in KERNEL_NAMES:
                shown = f"'{f}'" if f else "an empty name"
                raise BnnkitError(
                    f"unknown kernel {shown} in spec {spec!r}; valid names are {', '.join(KERNEL_NAMES)}, "
                    "combined with '+' and '*' (e.g. 'rbf+linear', 'rbf*periodic')."
                )
        terms.append(factors)
    return terms


def make_kernel(spec: str | Kernel, input_dim: int, ard: bool = True) -> Kernel:
    """Build a GPyTorch kernel from ``spec`` (see the module docstring), or return a kernel as is.

    Args:
        spec: a spec string or a ``gpytorch.kernels.Kernel`` (returned unchanged).
        input_dim: number of input columns ``d``.
        ard: one lengthscale (and period / linear variance) per input dimension when ``d > 1``.
    """
    if isinstance(spec, Kernel):
        return spec
    check_int_at_least("input_dim", input_dim, 1)
    ard_dims = input_dim if ard and input_dim > 1 else None
    terms = [_term(factors, ard_dims) for factors in parse_spec(spec)]
    kernel = terms[0] if len(terms) == 1 else gpytorch.kernels.AdditiveKernel(*terms)
    kernel._bnnkit_name = spec.lower().replace(" ", "")
    return kernel


def kernel_matrix(kernel: Kernel, x: Tensor) -> Tensor:
    """``k(x, x)`` as a dense tensor, evaluated at once (not as a lazy kernel operator)."""
    with gpytorch.settings.lazily_evaluate_kernels(False):
        return kernel(x, x).to_dense()


def kernel_label(module: Kernel) -> str:
    name = getattr(module, "_bnnkit_name", None)
    if name is None:
        cls = type(module).__name__.lower()
        name = cls[: -len("kernel")] if cls.endswith("kernel") and cls != "kernel" else cls
    return name


def hyperparameter_sites(kernel: Kernel, name: str) -> list[tuple[str, Kernel]]:
    """``(label, module)`` for every component of ``kernel`` that has hyperparameter ``name``."""
    attr, cls = HYPERPARAMETERS[name]
    sites = []
    for module in kernel.modules():
        if not isinstance(module, cls):
            continue
        if name == "lengthscale" and not module.has_lengthscale:
            continue
        sites.append((kernel_label(module), module))
    return sites


def _value(t: Tensor) -> float | list[float]:
    flat = t.detach().flatten().double().cpu()
    return float(flat[0]) if flat.numel() == 1 else [float(v) for v in flat]


def kernel_hyperparameters(kernel: Kernel) -> dict[str, float | list[float]]:
    """Current hyperparameter values; ``lengthscale`` etc. when unique, else ``lengthscale_rbf`` ..."""
    out: dict[str, float | list[float]] = {}
    for name, (attr, _) in HYPERPARAMETERS.items():
        sites = hyperparameter_sites(kernel, name)
        seen: dict[str, int] = {}
        for label, module in sites:
            key = name if len(sites) == 1 else f"{name}_{label}"
            if key in seen:
                seen[key] += 1
                key = f"{key}_{seen[key]}"
            else:
                seen[key] = 0
            out[key] = _value(getattr(module, attr))
    return out


def set_hyperparameter(kernel: Kernel, name: str, value: float | Tensor | list[float]) -> None:
    """Set ``name`` (a key of :data:`HYPERPARAMETERS`) on every component that has it.

    ``value`` is a number or one value per input dimension (ARD); all entries must be finite and > 0.
    """
    attr, _ = HYPERPARAMETERS[name]
    sites = hyperparameter_sites(kernel, name)
    if not sites:
        raise BnnkitError(
            f"{name}={value!r} was given but kernel '{kernel_label(kernel)}' has no {name} hyperparameter."
        )
    v = torch.as_tensor(value, dtype=torch.float64).detach().flatten()
    if v.numel() == 0 or not torch.isfinite(v).all() or (v <= 0).any():
        raise BnnkitError(f"{name} must be finite and > 0, got {value!r}.")
    for _, module in sites:
        current = getattr(module, attr)
        width = current.shape[-1] if current.ndim else 1
        if v.numel() not in (1, width):
            raise BnnkitError(
                f"{name} has {v.numel()} values but the kernel has {width} per component; "
                "give one number, or one per input dimension when ard=True."
            )
        setattr(module, attr, (v if width > 1 else v[:1].reshape(current.shape)).to(current))
