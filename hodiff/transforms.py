"""vjp, jvp, hvp, hessian, jacobian (being written)."""

__all__: list[str] = []
