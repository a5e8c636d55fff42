"""RMSNorm under torch.func and second derivatives, against torch.nn.RMSNorm with the same γ.

Its backward was once-differentiable: ``torch.func.grad``, ``vmap`` and ``jacfwd`` of any model
holding an RMSNorm (every Llama-family one) refused to run ("must override the setup_context
staticmethod"), and a second derivative was silently zero where unused inputs are allowed
(``gradgradcheck`` found its Jacobian all zeros)."""
import pytest
import torch
from torch.func import functional_call, grad, hessian, jacfwd, vmap
from torch.testing import assert_close

from attnlab.nn import RMSNorm

D, EPS = 6, 1e-5


def pair():
    """Ours and torch's, float64, with the same γ (not ones, so ∂/∂γ is tested too)."""
    ours, theirs = RMSNorm(D, eps=EPS).double(), torch.nn.RMSNorm(D, eps=EPS).double()
    with torch.no_grad():
        ours.weight.copy_(torch.linspace(0.5, 2.0, D, dtype=torch.float64))
        theirs.weight.copy_(ours.weight)
    return ours, theirs


def test_second_derivatives_are_gradgradcheck_right():
    norm, _ = pair()
    x = torch.randn(3, D, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(norm, (x,))
    assert torch.autograd.gradgradcheck(norm, (x,))
    assert torch.autograd.gradgradcheck(
        lambda w: torch.func.functional_call(norm, {"weight": w}, (x,)),
        (norm.weight.detach().clone().requires_grad_(),))


@pytest.mark.parametrize("transform", ["grad", "vmap", "jacfwd", "hessian", "gradient penalty"])
def test_torch_func_transforms_equal_torch_rms_norms(transform):
    ours, theirs = pair()
    torch.manual_seed(0)
    x = torch.randn(4, D, dtype=torch.float64)

    def run(norm):
        loss = lambda t: norm(t).pow(3).sum()  # noqa: E731 (a cube: its Hessian is not 0)
        if transform == "grad":
            return grad(lambda p, t: functional_call(norm, p, (t,)).pow(3).sum(),
                        argnums=(0, 1))(dict(norm.named_parameters()), x)
        if transform == "vmap":  # per-sample gradients, as one writes them
            return vmap(grad(lambda t: loss(t[None])))(x)
        if transform == "jacfwd":
            return jacfwd(norm)(x[0])
        if transform == "hessian":
            return hessian(loss)(x[0])
        t = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(loss(t), t, create_graph=True)
        return torch.autograd.grad(g.pow(2).sum(), t)[0]

    # float64, the same formula by other operations: 1e-10
    assert_close(run(ours), run(theirs), rtol=1e-10, atol=1e-10)


def test_forward_over_reverse_hessian_vector_product_equals_torch_rms_norms():
    """A Hessian-vector product by forward AD around ``torch.autograd.grad`` without
    ``create_graph``: r's tangent (∂r/∂x) was dropped, 5.37 off on values up to 11.9, no error."""
    import torch.autograd.forward_ad as fwAD

    ours, theirs = pair()
    torch.manual_seed(0)
    x, v = torch.randn(3, D, dtype=torch.float64), torch.randn(3, D, dtype=torch.float64)

    def hvp(norm):
        t = x.clone().requires_grad_()
        with fwAD.dual_level():
            (g,) = torch.autograd.grad(norm(fwAD.make_dual(t, v)).pow(3).sum(), t)
            return fwAD.unpack_dual(g).tangent

    # float64, the same formula by other operations: 1e-10
    assert_close(hvp(ours), hvp(theirs), rtol=1e-10, atol=1e-10)
