"""What Vela compiles for: an accelerator, and the system config, memory mode and vela.ini it is compiled with.

A cost-model calibration holds for one configuration only. The system config sets the clocks, bandwidths
and latencies of each memory, and the memory mode where tensors are placed (Vela's
`config_files/Arm/vela.ini`), and both change what a layer costs: the access side most of all. So eqsat
prices a graph only with the calibration of exactly the configuration the lowering compiles for, and
refuses any other (`eqsat.extract.cost.cost_model_for`).

The Arm backend names the configuration in `EthosUCompileSpec(target, system_config=None,
memory_mode=None, config_ini="Arm/vela.ini")`, and passes it to Vela as `--accelerator-config`,
`--system-config`, `--memory-mode` and `--config` (`EthosUCompileSpec._build_compiler_flags`). Where the
spec leaves the system config or memory mode out, it picks its target family's default
(`EthosUCompileSpec._default_system_config_and_memory_mode`). `DEFAULTS` repeats that table so that the
cost model can find a calibration without importing executorch; tests/test_configuration.py checks that
the two agree on every target.

Targets: the accelerator configurations of Vela 5.1 (`ethosu.vela.architecture_features.Accelerator`),
all of which `EthosUCompileSpec` accepts. Plain data: no torch, no executorch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

ACCELERATORS = tuple(
    [f"ethos-u55-{macs}" for macs in (32, 64, 128, 256)]
    + [f"ethos-u65-{macs}" for macs in (256, 512)]
    + [f"ethos-u85-{macs}" for macs in (128, 256, 512, 1024, 2048)]
)
"""Vela 5.1's accelerator configurations, in its order (`Accelerator.member_list()`)."""

DEFAULT_CONFIG_INI = "Arm/vela.ini"
"""The vela.ini `EthosUCompileSpec` names when it is given none: the one installed with Vela."""

DEFAULTS = {
    "ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only"),
}
"""Each product's default (system config, memory mode), as EthosUCompileSpec resolves them."""


class UnknownTargetError(ValueError):
    """A target string that is not one of Vela's accelerator configurations."""


def check_target(target: str) -> str:
    """target, if Vela knows it; otherwise UnknownTargetError listing the ones it knows."""
    if target not in ACCELERATORS:
        raise UnknownTargetError(f"unknown target {target!r}; expected one of {', '.join(ACCELERATORS)}")
    return target


def product(target: str) -> str:
    """"ethos-u55", "ethos-u65" or "ethos-u85": the NPU of an accelerator configuration."""
    return check_target(target).rpartition("-")[0]


class Generation(StrEnum):
    """An Ethos-U architecture of Vela's compiler, with its own performance model and operator support: Ethos-U65 is
    of the U55 generation (`eqsat.extract.vela_cost.target_family` maps a target to its generation)."""

    U55 = "u55"
    U85 = "u85"


@dataclass(frozen=True)
class Configuration:
    """One accelerator configuration and the system config, memory mode and vela.ini Vela compiles it with."""

    target: str
    system_config: str
    memory_mode: str
    config_ini: str = DEFAULT_CONFIG_INI

    @classmethod
    def of(
        cls, target: str, system_config: str | None = None, memory_mode: str | None = None, config_ini: str | None = None
    ) -> Configuration:
        """The configuration EthosUCompileSpec(target, system_config, memory_mode, config_ini) compiles for: what
        is left out (None) is the target's default. Raises UnknownTargetError for a target Vela does not know."""
        default_system_config, default_memory_mode = DEFAULTS[product(target)]
        return cls(
            target,
            default_system_config if system_config is None else system_config,
            default_memory_mode if memory_mode is None else memory_mode,
            DEFAULT_CONFIG_INI if config_ini is None else config_ini,
        )

    @classmethod
    def resolve(cls, target: Configuration | str) -> Configuration:
        """target itself, or a target alone at its default configuration (`of`)."""
        return target if isinstance(target, Configuration) else cls.of(target)

    @property
    def is_default(self) -> bool:
        """Whether this is the configuration EthosUCompileSpec(target) picks when given only the target."""
        return self == Configuration.of(self.target)

    @property
    def name(self) -> str:
        """A name for files (calibration, benchmark rows): the target alone for its default configuration,
        else the target, system config and memory mode, and the vela.ini's file name when it is not Vela's."""
        if self.is_default:
            return self.target
        parts = [self.target, self.system_config, self.memory_mode]
        if self.config_ini != DEFAULT_CONFIG_INI:
            parts.append(self.config_ini.replace("\\", "/").rpartition("/")[2].removesuffix(".ini"))
        return ".".join(re.sub(r"[^A-Za-z0-9_-]", "_", part) for part in parts)

    def describe(self) -> str:
        """The configuration for people: "ethos-u85-256 with Ethos_U85_SYS_DRAM_Mid/Sram_Only" (and the vela.ini
        when it is not Vela's)."""
        ini = "" if self.config_ini == DEFAULT_CONFIG_INI else f" from {self.config_ini}"
        return f"{self.target} with {self.system_config}/{self.memory_mode}{ini}"

    def calibrate_command(self) -> str:
        """The `eqsat calibrate` command that calibrates this configuration."""
        system_config, memory_mode = DEFAULTS[product(self.target)]
        flags = [f"--target {self.target}"]
        if self.system_config != system_config:
            flags.append(f"--system-config {self.system_config}")
        if self.memory_mode != memory_mode:
            flags.append(f"--memory-mode {self.memory_mode}")
        if self.config_ini != DEFAULT_CONFIG_INI:
            flags.append(f"--config-ini {self.config_ini}")
        return "eqsat calibrate " + " ".join(flags)

    def as_data(self) -> dict[str, str]:
        """The fields a calibration file records (`config` is the vela.ini, as Vela's flag names it)."""
        return {"target": self.target, "system_config": self.system_config, "memory_mode": self.memory_mode, "config": self.config_ini}


def read_vela_ini(configuration: Configuration):
    """The configuration's vela.ini files, parsed (Vela reads a two-part path such as Arm/vela.ini from its own
    config_files directory, any other from where it points); ValueError for a file that is not there."""
    from configparser import ConfigParser
    from pathlib import Path

    from ethosu.vela.architecture_features import CONFIG_FILES_PATH

    ini = ConfigParser()
    for name in configuration.config_ini.split(";"):
        path = Path(name).expanduser()
        if not path.is_file() and len(Path(name).parts) == 2:
            path = Path(CONFIG_FILES_PATH) / name
        if not path.is_file():
            raise ValueError(f"no vela.ini {name}")
        ini.read(path)
    return ini


def _section_values(configuration: Configuration, section: str) -> dict[str, str]:
    """The keys of a section of the configuration's vela.ini, then those of the sections it inherits from (empty when
    the vela.ini is not there: check_configuration says what is missing)."""
    try:
        ini = read_vela_ini(configuration)
    except ValueError:
        return {}
    values: dict[str, str] = {}
    while ini.has_section(section):
        values = dict(ini.items(section)) | values
        section = ini.get(section, "inherit", fallback="")
    return values


def memory_mode_of(configuration: Configuration) -> dict[str, str]:
    """The keys of the configuration's memory mode in its vela.ini (`_section_values`)."""
    return _section_values(configuration, f"Memory_Mode.{configuration.memory_mode}")


def system_config_of(configuration: Configuration) -> dict[str, str]:
    """The keys of the configuration's system config in its vela.ini (`_section_values`)."""
    return _section_values(configuration, f"System_Config.{configuration.system_config}")


def unpriceable(configuration: Configuration) -> str | None:
    """Why eqsat cannot price the configuration at all (None: it can, once calibrated).

    A memory mode whose arena lives off-chip with the SRAM as its cache (vela.ini `Dedicated_Sram*`: arena_mem_area
    is not cache_mem_area, the default of Ethos-U65) leaves it to Vela's scheduler, graph by graph, which tensors the
    cache holds. Calibration measures small graphs, several to a TOSA file, which share that cache, and its per-op fit
    cannot follow the placement: fitted that way, ethos-u65-256 priced ten zoo models 47-366% above Vela's
    `cycles_total`, and eqsat made 3 of them slower (attention-permute +1.4%, mobilenet-v1-025-vww +4.8%,
    unet-skip +3.6%). Nor is it `Shared_Sram` (arena in the SRAM, constants in DRAM, which eqsat prices) plus the
    graph's inputs and outputs in DRAM: compiled both ways, 15 zoo models on ethos-u65-256 differ by -16% to +104%
    in `cycles_total`, in interior layers too (a MATMUL's scratch lives in the arena: +135% on attention-permute;
    convolutions' weight buffering changes under the cache's size). Layer by layer on ten zoo models (+29.7% in
    all): the MATMULs' int32 products, which Ethos-U55's estimator writes and reads in the arena
    (`EthosU55Performance::EstimateMatMulCycles`, `tmpMemory`), account for 81% of the difference, convolutions
    inside the graph for 12%, the layers reading graph inputs or writing outputs in the slow memory for 6%."""
    values = memory_mode_of(configuration)
    arena, cache = values.get("arena_mem_area"), values.get("cache_mem_area")
    if arena and cache and arena != cache:
        return (
            f"memory mode {configuration.memory_mode} keeps the arena in {arena} with {cache} as its cache, whose use "
            "Vela's scheduler decides per graph: eqsat's calibration cannot measure it (see eqsat.configuration.unpriceable)"
        )
    return None


VELA_FLAGS = ("--accelerator-config", "--system-config", "--memory-mode", "--config")


def vela_flag_values(flags: list[str]) -> dict[str, str | None]:
    """The target, system config, memory mode and vela.ini that Vela's command-line flags name (the last of
    each, as Vela's argparse reads them; None for a flag that is absent). Several `--config` files (Vela
    reads them all, in order) are joined by ";"."""
    values: dict[str, list[str]] = {}
    for flag, following in zip(flags, [*flags[1:], None]):
        name, equals, value = flag.partition("=")
        if equals:
            values.setdefault(name, []).append(value)
        elif name in VELA_FLAGS and following is not None:  # "--memory-mode", "Sram_Only"
            values.setdefault(name, []).append(following)

    def last(name: str) -> str | None:
        return values[name][-1] if name in values else None

    configs = values.get("--config")
    return {
        "target": last("--accelerator-config"),
        "system_config": last("--system-config"),
        "memory_mode": last("--memory-mode"),
        "config_ini": ";".join(configs) if configs else None,
    }
