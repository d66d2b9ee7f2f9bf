"""Contact sensing for the mjwarp adapter: one pass over the live contacts after the last substep.

A request resolves (``unisim.contacts.ContactPlan``) to rows, each a sensed body with a filter
on the other side. Rather than one MuJoCo ``<contact>`` sensor per (body, target), which
mujoco_warp evaluates in every substep with a match kernel of ``sensors x naconmax`` threads,
the step graph ends with:

1. ``mjw.contact_force``: each live contact's force, world frame (the force geom1 exerts on
   geom2; contacts outside the constraint solve read zero);
2. ``contact_accumulate``: one thread per contact adds ``-F`` to the rows sensing geom1's body
   that let geom2 pass, and ``+F`` to the rows sensing geom2's body that let geom1 pass;
3. ``contact_flags``: ``in_contact = |force| > threshold`` per row.

These are the forces of the last substep's constraint solve, as the sensors' were. The sums use
atomics, so on CUDA their order (and last bits) may vary between runs; warp's CPU device runs
the threads serially.
"""

from __future__ import annotations

from typing import Any

import mujoco
import mujoco_warp as mjw
import warp as wp

from unisim.contacts import ContactFilter, ContactPlan


@wp.kernel
def contact_zero(force: wp.array2d(dtype=wp.vec3)):
    world, row = wp.tid()
    force[world, row] = wp.vec3(0.0, 0.0, 0.0)


@wp.kernel
def contact_accumulate(
    nacon: wp.array(dtype=int),
    contact_geom: wp.array(dtype=wp.vec2i),
    contact_worldid: wp.array(dtype=int),
    contact_force: wp.array(dtype=wp.spatial_vector),
    geom_bodyid: wp.array(dtype=int),
    body_row_start: wp.array(dtype=wp.int32),
    body_rows: wp.array(dtype=wp.int32),
    row_passes_geom: wp.array2d(dtype=wp.int32),
    force: wp.array2d(dtype=wp.vec3),
):
    """Add each live contact's force to the rows of the two bodies it touches (see module doc)."""
    c = wp.tid()
    if c >= nacon[0]:
        return
    geoms = contact_geom[c]
    world = contact_worldid[c]
    on_geom2 = wp.spatial_top(contact_force[c])
    body1 = geom_bodyid[geoms[0]]
    for k in range(body_row_start[body1], body_row_start[body1 + 1]):
        row = body_rows[k]
        if row_passes_geom[row, geoms[1]] != 0:
            wp.atomic_add(force, world, row, -on_geom2)
    body2 = geom_bodyid[geoms[1]]
    for k in range(body_row_start[body2], body_row_start[body2 + 1]):
        row = body_rows[k]
        if row_passes_geom[row, geoms[0]] != 0:
            wp.atomic_add(force, world, row, on_geom2)


@wp.kernel
def contact_flags(
    force: wp.array2d(dtype=wp.vec3),
    threshold: wp.array(dtype=float),
    in_contact: wp.array2d(dtype=wp.bool),
):
    world, row = wp.tid()
    in_contact[world, row] = wp.length(force[world, row]) > threshold[row]


def _passing_geoms(model: mujoco.MjModel, filter: ContactFilter, other: int) -> set[int]:
    """Geoms on the other side that a target lets through."""
    geom_body = model.geom_bodyid
    if filter is ContactFilter.ANY:
        return set(range(model.ngeom))
    if filter is ContactFilter.BODIES:
        return {g for g in range(model.ngeom) if int(geom_body[g]) == other}
    if filter is ContactFilter.GEOMS:
        return {other}
    # SELF: ``other`` is the root of the sensed body's tree, so its subtree is the bodies of that root.
    return {g for g in range(model.ngeom) if int(model.body_rootid[geom_body[g]]) == other}


def contact_tables(model: mujoco.MjModel, plan: ContactPlan, num_envs: int, naconmax: int) -> dict[str, Any]:
    """Index tables, scratch and outputs of the contact pass; empty when nothing was asked."""
    if not plan.targets:
        return {}
    passes = [[0] * model.ngeom for _ in range(plan.rows)]
    row_body = [0] * plan.rows
    for target in plan.targets:  # a row's targets are disjoint, so their union is their sum
        row_body[target.row] = target.body
        for g in _passing_geoms(model, target.filter, target.other):
            if int(model.geom_bodyid[g]) != target.body:  # a body has no contact with itself
                passes[target.row][g] = 1
    rows_of = [[r for r in range(plan.rows) if row_body[r] == b] for b in range(model.nbody)]
    starts = [0]
    for rows in rows_of:
        starts.append(starts[-1] + len(rows))
    return {
        "rows": plan.rows,
        "body_row_start": wp.array(starts, dtype=wp.int32),
        "body_rows": wp.array([r for rows in rows_of for r in rows] or [0], dtype=wp.int32),
        "row_passes_geom": wp.array(passes, dtype=wp.int32),
        "threshold": wp.array(list(plan.thresholds), dtype=float),
        **contact_buffers(plan.rows, num_envs, naconmax),
    }


def contact_buffers(rows: int, num_envs: int, naconmax: int) -> dict[str, wp.array]:
    """The pass's per-contact scratch and its per-world outputs ``force``/``in_contact``."""
    return {
        "contact_ids": wp.array(list(range(naconmax)), dtype=wp.int32),
        "contact_force": wp.zeros(naconmax, dtype=wp.spatial_vector),
        "force": wp.zeros((num_envs, rows), dtype=wp.vec3),
        "in_contact": wp.zeros((num_envs, rows), dtype=wp.bool),
    }


def publish_contacts(m: Any, d: Any, tables: dict[str, Any]) -> None:
    """The three launches of the module doc, for data ``d`` into ``tables['force'|'in_contact']``."""
    rows, force, contact_ids = tables["rows"], tables["force"], tables["contact_ids"]
    wp.launch(contact_zero, dim=(d.nworld, rows), outputs=[force])
    mjw.contact_force(m, d, contact_ids, True, tables["contact_force"])
    wp.launch(contact_accumulate, dim=contact_ids.shape[0],
              inputs=[d.nacon, d.contact.geom, d.contact.worldid, tables["contact_force"], m.geom_bodyid,
                      tables["body_row_start"], tables["body_rows"], tables["row_passes_geom"]],
              outputs=[force])
    wp.launch(contact_flags, dim=(d.nworld, rows), inputs=[force, tables["threshold"]],
              outputs=[tables["in_contact"]])
