"""unilab: the tensor-native Manager runtime and its task owners.

``make_manager_based_rl_env`` is the only way to build a training environment.
"""

from unilab.registry import (
    list_tasks,
    make_manager_based_rl_env,
    register_task,
    task_config,
)

__all__ = ["ManagerBasedRlEnv", "list_tasks", "make_manager_based_rl_env", "register_task", "task_config"]


def __getattr__(name: str):
    # Lazy: importing unilab must not import the simulator stack.
    if name == "ManagerBasedRlEnv":
        from unilab.env import ManagerBasedRlEnv
        return ManagerBasedRlEnv
    raise AttributeError(name)
