# The experiments' one workflow (ldr_experiments/engine.py): a rule per stage of a plan file
# (config["plan"], written by engine.write_plan), whose job loads that stage as the engine
# pickled it (OUT/workflow/stages/NAME.pickle) and runs it, never the driver again:
#   cd ROOT && python -m ldr_experiments.engine stage PLAN NAME
# Its output is the stage's marker, done/NAME, written when the stage has run (or was found done
# from the same inputs); a rule reruns when the engine forces it (the stage's stamp is due: one
# rule, engine.py) or a stage it comes after ran again (the markers' times). Run from
# OUT/workflow.
import json

PLAN = json.load(open(config["plan"], encoding="utf-8"))
GPUS = int(config.get("gpus_per_training", 0))


def _resources(kind):
    # lanes: one of the machine's lanes (engine.snakemake_command gives --resources lanes=N);
    # on SLURM, a training or translation job asks for its GPUs, cores, memory and time.
    resources = {"lanes": 1}
    if kind in ("train", "evaluate") and "cpus_per_training" in config:
        resources["cpus_per_task"] = int(config["cpus_per_training"])
        resources["mem_mb"] = int(config["mem_mb_per_training"])
        resources["runtime"] = int(config["minutes_per_training"])
        if GPUS:
            resources["gpu"] = GPUS
    return resources


for _stage in PLAN["stages"]:

    rule:
        name:
            _stage["rule"]
        input:
            ["done/%s" % name for name in _stage["after"]],
        output:
            "done/%s" % _stage["name"],
        params:
            name=_stage["name"],
            python=PLAN["python"],
            plan=config["plan"],
            root=PLAN["root"],
        threads: 1
        priority: _stage["priority"]
        resources:
            **_resources(_stage["kind"]),
        localrule: _stage["kind"] == "local"
        # The driver's working directory (the plan's root): the stage's relative paths lead
        # from there, as in the engine's process that declared it.
        shell:
            "cd {params.root:q} && "
            "{params.python} -m ldr_experiments.engine stage {params.plan:q} {params.name:q}"


rule all:
    default_target: True
    localrule: True
    input:
        ["done/%s" % stage["name"] for stage in PLAN["stages"]],
