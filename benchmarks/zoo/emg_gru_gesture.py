"""Two-layer GRU gesture model, unrolled over eight EMG frames, with hoisted input projections."""

import torch
from torch import nn


class UnrolledGruLayer(nn.Module):
    """One GRU layer written with explicit gates, unrolled over the frames of a sequence.

    The input projection of every frame is computed at once (one linear over
    the whole sequence, as streaming GRU implementations hoist it) and sliced
    per step; per step only the hidden projection runs. Gates follow
    nn.GRUCell: r = σ(x_r + h_r), z = σ(x_z + h_z), n = tanh(x_n + r * h_n),
    h' = n + z * (h - n). The per-step states are concatenated along time.
    """

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.input_projection = nn.Linear(input_size, 3 * hidden)
        self.hidden_projection = nn.Linear(hidden, 3 * hidden)

    def forward(self, sequence: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        h = self.hidden
        projected = self.input_projection(sequence)
        states = []
        for t in range(sequence.shape[1]):
            step = projected[:, t, :]
            recurrent = self.hidden_projection(state)
            reset = torch.sigmoid(step[:, :h] + recurrent[:, :h])
            update = torch.sigmoid(step[:, h : 2 * h] + recurrent[:, h : 2 * h])
            candidate = torch.tanh(step[:, 2 * h :] + reset * recurrent[:, 2 * h :])
            state = candidate + update * (state - candidate)
            states.append(state.unsqueeze(1))
        return torch.cat(states, dim=1)


class EmgGruGesture(nn.Module):
    """Strided conv1d frames, layer norm, two unrolled GRU layers, per-frame gesture logits.

    The initial states come from the mean frame (a learned summary, as in
    seq2seq encoders), so no constant zero state enters the graph.
    """

    def __init__(self, emg_channels: int = 8, features: int = 16, hidden: int = 16, num_classes: int = 8):
        super().__init__()
        self.frames = nn.Sequential(nn.Conv1d(emg_channels, features, kernel_size=8, stride=8), nn.ReLU())
        self.norm = nn.LayerNorm(features)
        self.initial = nn.Linear(features, 2 * hidden)
        self.hidden = hidden
        self.layer1 = UnrolledGruLayer(features, hidden)
        self.between = nn.LayerNorm(hidden)
        self.layer2 = UnrolledGruLayer(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        sequence = self.norm(self.frames(emg).permute(0, 2, 1))
        initial = torch.tanh(self.initial(sequence.mean(dim=1)))
        first = self.layer1(sequence, initial[:, : self.hidden])
        second = self.layer2(self.between(first), initial[:, self.hidden :])
        return self.classifier(second)


def build_emg_gru_gesture() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgGruGesture().eval()
    return model, (torch.randn(1, 8, 64),)
