"""DESIGN.md principle 1: planning and algebra never import Ray; the public API is explicit."""

import subprocess
import sys

import pytest

PURE = ["elastic_coded", "elastic_coded.algebra", "elastic_coded.algebra.lagrange",
        "elastic_coded.algebra.mds", "elastic_coded.families.usctec", "elastic_coded.schemes.plan",
        "elastic_coded.schemes.reference", "elastic_coded.schemes.registry",
        "elastic_coded.families.unified", "elastic_coded.families.hetero", "elastic_coded.churn",
        "elastic_coded.config", "elastic_coded.schemes.speeds", "elastic_coded.sim",
        "elastic_coded.jobs", "elastic_coded.cli", "elastic_coded.errors",
        "elastic_coded.schemes.families", "elastic_coded.families", "elastic_coded.runtime.members",
        "elastic_coded.runtime.storage", "elastic_coded.families.unified.policy",
        "elastic_coded.families.unified.store", "elastic_coded.families.unified.sim",
        "elastic_coded.families.hetero.policy", "elastic_coded.families.hetero.store",
        "elastic_coded.families.hetero.sim", "elastic_coded.families.usctec.pull",
        "elastic_coded.families.usctec.pull_step", "elastic_coded.families.usctec.store",
        "elastic_coded.sim.pulled", "elastic_coded.sim.pull",
        "elastic_coded.sim.lagrange_lies"]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_not_import_ray(module):
    code = f"import sys, {module}; sys.exit(1 if 'ray' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0, f"{module} imports ray"


def test_public_api_is_explicit():
    import elastic_coded

    for name in elastic_coded.__all__:
        assert getattr(elastic_coded, name) is not None
    assert elastic_coded.ElasticCluster.__name__ == "ElasticCluster"
