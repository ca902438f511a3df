"""The policy as the external model (algos/ppo_poi_policy.py): its MC-dropout interest, and the
masks that make the update see the network that acted."""

import math

import torch

from algos.ppo_poi_policy import Agent, policy_poi


def test_policy_poi_is_the_mutual_information_of_a_plain_loop_over_the_masks():
    torch.manual_seed(0)
    agent = Agent(980, 7, dropout=0.3)
    with torch.no_grad():
        agent.actor[-1].weight.mul_(100)  # logits that the masks move
    obs = (torch.rand(5, 980) < 0.15).float()
    obs = torch.cat([obs, obs[:2]])  # repeated observations: computed once, the same value
    poi = policy_poi(agent, obs, 40, torch.Generator().manual_seed(3))
    masks = agent.draw_masks((40, 1), torch.Generator().manual_seed(3))[:, 0]
    for i, x in enumerate(obs):
        probs = []
        for m in masks:  # each mask by hand: tanh layers, hidden units times the mask
            h = torch.tanh(agent.actor[0](x)) * m[:256]
            h = torch.tanh(agent.actor[2](h)) * m[256:]
            probs.append(torch.softmax(agent.actor[4](h), -1))
        probs = torch.stack(probs).double()
        mean = probs.mean(0)
        expected = -(mean * mean.log()).sum() + (probs * probs.log()).sum(-1).mean()
        assert math.isclose(poi[i].item(), expected.item(), rel_tol=1e-4, abs_tol=1e-6)
    assert torch.equal(poi[5:], poi[:2]) and (poi > 1e-3).all() and (poi <= math.log(7)).all()


def test_policy_poi_is_zero_where_the_masks_do_not_change_the_distribution():
    agent = Agent(980, 7, dropout=0.3)
    with torch.no_grad():
        agent.actor[-1].weight.zero_()  # every mask gives softmax(bias): a random policy, no disagreement
        agent.actor[-1].bias.copy_(torch.arange(7.0))
    poi = policy_poi(agent, (torch.rand(4, 980) < 0.15).float(), 30)
    assert torch.allclose(poi, torch.zeros(4), atol=1e-6)


def test_the_update_sees_the_network_that_acted():
    """The stored mask gives back the rollout's log-probability (the first ratio is 1); another mask does not;
    masks are 0 or 1 / keep, about a share keep of them kept."""
    torch.manual_seed(1)
    agent = Agent(980, 7, dropout=0.2)
    with torch.no_grad():
        agent.actor[-1].weight.mul_(100)
    x = (torch.rand(64, 980) < 0.15).float()
    masks = agent.draw_masks((64,))
    assert set(masks.unique().tolist()) == {0.0, 1.25} and abs((masks > 0).float().mean().item() - 0.8) < 0.02
    with torch.no_grad():
        action, logprob, *_ = agent.get_action_and_value(x, masks)
        _, again, *_ = agent.get_action_and_value(x, masks, action)
        _, other, *_ = agent.get_action_and_value(x, agent.draw_masks((64,)), action)
    assert torch.equal(again, logprob) and not torch.allclose(other, logprob)
    noise = torch.zeros(64, 7)  # the export acts with the mean network: masks of ones
    assert torch.equal(agent.act(x, noise), agent.actor_logits(x, torch.ones(320)).argmax(-1))
