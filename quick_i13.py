import sys, numpy as np, hodiff as hd, traceback
from hodiff.testing import all_specs, spec_ids
from tests.harness import call, outputs_of, scalarized, weights, is_float
mods = sys.argv[1].split(",")
order = int(sys.argv[2]) if len(sys.argv) > 2 else 3
for s, i in zip(all_specs(), spec_ids(all_specs())):
    if s.fn.__module__.split(".")[-1] not in mods and not any(m in i for m in mods):
        continue
    try:
        xs = s.sample()
        _, y = call(s, xs)
        if s.ref is not None:
            refs = s.ref(*xs, **s.kwargs); refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
            for o, r in zip(outputs_of(y), refs):
                np.testing.assert_allclose(o.d, r, atol=s.ref_atol, rtol=s.ref_rtol)
        if s.order >= 1:
            ws = weights(s)
            hd.gradcheck(scalarized(s, ws), xs, order=1, atol=s.atol, rtol=s.rtol)
            if min(s.order, order) >= 2:
                hd.gradcheck(scalarized(s, ws, power=3 if s.linear else 1), xs, order=min(s.order, order), atol=s.atol, rtol=s.rtol)
        print("ok  ", i)
    except Exception as e:
        print("FAIL", i, type(e).__name__, str(e)[:600])
