"""Genesis's zero-copy views of the solver buffers its getters clone.

Genesis's getters (get_qpos, get_links_pos, get_contacts, ...) clone the whole buffer and rebuild
their indices on every call. With zero-copy on, Genesis keeps torch views of those buffers that its
kernels update in place; the adapter reads them through its own index tensors instead, for the
same values bit for bit. These functions name the buffers, or return None where the getters must
be used. The buffers are Genesis's internals: the pinned genesis-world version is what they are
written against, and the adapter's test compares them with the getters bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch


def _link_offsets_are_identity(links) -> bool:
    """No link has a pose offset (morph offset, aligned free root): Genesis's relative link getters
    (get_links_pos/quat/vel) then return the solver's buffers as they are. Exact, stricter than
    Genesis's own test (identity within gs.EPS)."""
    return all(tuple(float(x) for x in link.desc.offset_pos) == (0.0, 0.0, 0.0)
               and tuple(float(x) for x in link.desc.offset_quat) == (1.0, 0.0, 0.0, 0.0) for link in links)


def _zero_copy(field: Any, transpose: bool = True) -> torch.Tensor:
    from genesis.utils.misc import qd_to_torch

    return qd_to_torch(field, transpose=transpose, copy=False)


def state_views(scene: Any) -> dict[str, torch.Tensor] | None:
    """Genesis's zero-copy views (batch first) of the rigid solver's state buffers that its getters
    clone, or None where the getters must be used: zero-copy off (Genesis then has no views),
    Apple Metal (its getters synchronise first), or a link pose offset the getters strip. The
    adapter builds one MJCF entity per scene (no heterogeneous variants), so the links' own
    offsets are the solver's."""
    import genesis as gs

    solver = scene.rigid_solver
    if not gs.use_zerocopy or gs.backend == gs.metal or not _link_offsets_are_identity(solver.links):
        return None
    state = solver.dyn_state
    # A buffer without a view here is an unexpected Genesis: it raises rather than quietly
    # falling back to the getters.
    return {"qpos": _zero_copy(solver.qpos), "dofs_vel": _zero_copy(state.dofs.vel),
            "pos": _zero_copy(state.links.pos), "quat": _zero_copy(state.links.quat),
            "cd_vel": _zero_copy(state.links.cd_vel), "cd_ang": _zero_copy(state.links.cd_ang),
            "root_COM": _zero_copy(state.links.root_COM),
            "contact_force": _zero_copy(state.links.contact_force)}


def contact_views(collider: Any) -> dict[str, torch.Tensor | None] | None:
    """The buffers get_contacts's zero-copy path reads, for link_a, link_b and force; None where
    get_contacts must be used (zero-copy off, Apple Metal)."""
    import genesis as gs

    if not gs.use_zerocopy or gs.backend == gs.metal:
        return None
    state, config = collider.collider_state, collider.collider_config
    views = {"n_contacts": _zero_copy(state.n_contacts, transpose=False),
             "link_a": _zero_copy(state.contact_data.link_a), "link_b": _zero_copy(state.contact_data.link_b),
             "force": _zero_copy(state.contact_data.force)}
    # get_contacts keeps the buffer order only when pruning and spatial sort are off (static config)
    in_order = not config.has_prunable_contacts and not config.has_non_box_plane_convex_convex
    views["sort_idx"] = None if in_order else _zero_copy(state.contact_sort_idx)
    return views
