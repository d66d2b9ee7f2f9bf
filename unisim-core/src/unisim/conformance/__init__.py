"""The SimBackend v1 conformance suite, shipped with unisim so anyone can run it.

    pytest --pyargs unisim.conformance --unisim-backend mujoco [--unisim-device cpu]
           [--unisim-model builtin,/path/to/scene.xml] [--unisim-num-envs 4]

Every active adapter must pass it on every device it declares. The reference for
"authoritative" views is the mujoco adapter (itself checked against ``mj_forward``).
"""

from pathlib import Path

BUILTIN_MODEL = Path(__file__).resolve().parent.parent / "models" / "hopper_arm.xml"
# Contact sensing (contract 1.3) is checked on this scene whatever --unisim-model says.
CONTACT_PROBE_MODEL = Path(__file__).resolve().parent.parent / "models" / "contact_probe.xml"
# Height scans (contract 1.5) are checked on this scene whatever --unisim-model says.
HEIGHT_SCAN_PROBE_MODEL = Path(__file__).resolve().parent.parent / "models" / "height_scan_probe.xml"
