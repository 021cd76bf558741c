"""EMG encoder with a small gated recurrent decoder, unrolled over four steps."""

import torch
from torch import nn


class GatedRecurrentCell(nn.Module):
    """Minimal gated unit (a GRU without the reset gate).

    One linear on [input, state] yields the update gate and the candidate
    state; the new state is `state + update * (candidate - state)`.
    """

    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.gates = nn.Linear(input_size + hidden, 2 * hidden)

    def forward(self, step: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        gates = self.gates(torch.cat([step, state], dim=-1))
        update, candidate = gates.chunk(2, dim=-1)
        update = torch.sigmoid(update)
        return state + update * (torch.tanh(candidate) - state)


class EmgRecurrentDecoder(nn.Module):
    """Conv encoder + recurrent decoder, the layout of streaming EMG gesture decoders.

    A strided conv1d turns 64 EMG samples into 4 steps; the initial state is
    derived from the mean encoding (as in seq2seq decoders), and a gated cell
    is applied step by step, emitting per-step logits.

    nn.GRU is deliberately not used: it does delegate (the Arm backend
    decomposes aten.gru.input), but it reaches the graph as one opaque node
    and its decomposition makes lowering take minutes. The explicit unrolled
    cell keeps every op visible and lowers quickly.
    """

    def __init__(self, emg_channels: int = 8, hidden: int = 16, num_classes: int = 8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv1d(emg_channels, hidden, kernel_size=16, stride=16), nn.ReLU()
        )
        self.initial_state = nn.Linear(hidden, hidden)
        self.cell = GatedRecurrentCell(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, emg: torch.Tensor) -> torch.Tensor:
        encoded = self.encoder(emg)
        state = torch.tanh(self.initial_state(encoded.mean(dim=-1)))
        states = []
        for t in range(encoded.shape[-1]):
            state = self.cell(encoded[:, :, t], state)
            states.append(state)
        return self.classifier(torch.stack(states, dim=1))


def build_emg_recurrent_decoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = EmgRecurrentDecoder().eval()
    return model, (torch.randn(1, 8, 64),)
