"""Where episodes start in the clips: adaptive, uniform or at the first frame.

Each clip is cut into bins of ``bin_frames`` frames. Adaptive sampling (BeyondMimic's)
keeps, per bin, an exponential moving average of how many episodes failed (terminated,
not timed out) in it, adds a uniform floor (``uniform_ratio`` spread over the bins by their
frames, so without failures a start is uniform over a clip's frames), lets
each bin also borrow the failures of the next ``kernel_size - 1`` bins of its clip,
weighted ``lambda ** distance`` (start a little before where it goes wrong), and samples
bins in proportion. Clips are picked by ``weights`` first. Everything is a tensor op over
all bins and all envs: sampling needs no row list and no host sync.
"""

from __future__ import annotations

import math

import torch


class StartSampler:
    def __init__(self, lengths: list[int], weights: list[float], bin_frames: int, mode: str, uniform_ratio: float,
                 alpha: float, kernel_size: int, decay: float, device: torch.device) -> None:
        self.mode, self.alpha, self.uniform_ratio = mode, alpha, uniform_ratio
        # Start frames leave at least one step before the clip's last frame.
        usable = [max(n - 1, 1) for n in lengths]
        bins = [math.ceil(u / bin_frames) for u in usable]
        self.num_bins = sum(bins)
        self.bin_clip = torch.repeat_interleave(torch.arange(len(bins), device=device),
                                                torch.tensor(bins, device=device))
        self.bin_offset = torch.tensor([sum(bins[:c]) for c in range(len(bins))], dtype=torch.int64, device=device)
        self.clip_bins = torch.tensor(bins, dtype=torch.int64, device=device)
        self.bin_first = (torch.arange(self.num_bins, device=device) - self.bin_offset[self.bin_clip]) * bin_frames
        self.usable = torch.tensor(usable, dtype=torch.int64, device=device)
        self.bin_size = torch.minimum(torch.full_like(self.bin_first, bin_frames),
                                      self.usable[self.bin_clip] - self.bin_first)
        self.bin_frames = bin_frames
        # Per clip: its first bin and its last (absolute bin indices), gathered together.
        self.clip_bin_span = torch.stack((self.bin_offset, self.bin_offset + self.clip_bins - 1), dim=1)
        # Per bin, what a draw reads: its clip, first frame, frame count and the last usable
        # start frame of its clip, gathered in one op.
        self.bin_table = torch.stack((self.bin_clip, self.bin_first, self.bin_size,
                                      self.usable[self.bin_clip] - 1), dim=1)
        w = torch.tensor(weights, dtype=torch.float32, device=device)
        self.clip_weight = w / w.sum()
        self.bin_weight = self.clip_weight[self.bin_clip]
        self.inv_log_bins = 1.0 / math.log(max(self.num_bins, 2))
        self.kernel = [decay ** i for i in range(kernel_size)]
        self.failed = torch.zeros(self.num_bins, device=device)  # EMA of failures per bin
        self.probabilities = torch.empty(self.num_bins, device=device)  # updated in place
        self._probabilities(out=self.probabilities)

    def bin_of(self, clip: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
        span = self.clip_bin_span[clip]
        return torch.minimum(span[:, 0] + frame // self.bin_frames, span[:, 1])

    def record(self, clip: torch.Tensor, frame: torch.Tensor, failed: torch.Tensor) -> None:
        """Fold this step's failures (``failed`` (N,) bool, at the envs' current frames)
        into the moving average. Only adaptive sampling reads it; the other modes' bin
        probabilities are fixed, so they skip the work."""
        if self.mode != "adaptive":
            return
        # failed <- (1 - alpha) failed + alpha * (failures per bin), the counts added in place.
        self.failed.mul_(1.0 - self.alpha).index_add_(0, self.bin_of(clip, frame), failed.float(), alpha=self.alpha)
        self._probabilities(out=self.probabilities)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The failure statistics adaptive sampling learned; everything else follows from the config."""
        return {"failed": self.failed.detach().to("cpu", copy=True)}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        failed = state.get("failed") if isinstance(state, dict) else None
        fits = (isinstance(state, dict) and set(state) == {"failed"} and isinstance(failed, torch.Tensor)
                and failed.shape == self.failed.shape and failed.is_floating_point()
                and bool(torch.isfinite(failed).all()) and not bool((failed < 0).any()))
        if not fits:
            raise ValueError(f"start sampler: expected {{'failed': finite float tensor >= 0 of shape "
                             f"{tuple(self.failed.shape)} (one per bin of these clips)}}, got {_describe(state)}")
        self.failed.copy_(failed)  # in place: a captured step graph reads these tensors by pointer
        self._probabilities(out=self.probabilities)

    def _probabilities(self, out: torch.Tensor) -> torch.Tensor:
        """Per bin: P(clip) * P(bin | clip)."""
        if self.mode == "adaptive":
            # The uniform floor in proportion to a bin's frames: a clip's short last bin (4 of
            # 455 frames at 50 per bin) drew a tenth of the starts where uniform gives it 1%.
            floor = self.uniform_ratio / self.num_bins * (self.bin_size / self.bin_frames)
            smoothed = self.failed
            for k, weight in enumerate(self.kernel[1:], start=1):  # failures k bins ahead, same clip only
                ahead = torch.zeros_like(self.failed)
                ahead[:-k] = self.failed[k:] * (self.bin_clip[:-k] == self.bin_clip[k:])
                smoothed = smoothed + weight * ahead  # a new tensor: failed stays as it was
            # The kernel borrows failures only. Borrowed as well, the floor came up short in a
            # clip's last bins (no bin of the clip lies ahead of them), so that without failures
            # they drew fewer starts than their frames; each bin's floor takes the kernel's whole
            # weight instead, what a bin with a complete look-ahead borrowed.
            p = smoothed + sum(self.kernel) * floor
        else:
            p = self.bin_size.float()  # uniform over frames
        per_clip = torch.zeros_like(self.clip_weight).index_add_(0, self.bin_clip, p)
        return torch.mul(p / per_clip[self.bin_clip], self.bin_weight, out=out)

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """(clip, frame) for ``n`` envs."""
        bins = torch.multinomial(self.probabilities, n, replacement=True, generator=generator)
        drawn = self.bin_table[bins]  # (n, 4): clip, first frame, frame count, last usable frame
        clip = drawn[:, 0]
        if self.mode == "start":
            return clip, torch.zeros_like(clip)
        u = torch.rand(n, generator=generator, device=bins.device)
        # u * count can round up to count in float32: the clip's last usable frame bounds it.
        frame = drawn[:, 1] + (u * drawn[:, 2]).long()
        return clip, torch.minimum(frame, drawn[:, 3])

    def entropy_and_top(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalized entropy of the bin distribution (1 = uniform) and its largest probability."""
        p = self.probabilities
        return torch.special.entr(p).sum() * self.inv_log_bins, p.max()  # entr(p) = -p log p, 0 at 0


def _describe(state: object) -> str:
    if not isinstance(state, dict):
        return type(state).__name__
    return "{" + ", ".join(f"{k!r}: {tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__}"
                           for k, v in state.items()) + "}"
