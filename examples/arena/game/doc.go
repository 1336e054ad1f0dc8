// Package game is the arena example's game, importable by its front ends
// (the headless command examples/arena and the graphical client): the
// shared components, input and step function (game.go), the authoritative
// server (ServerGame: NPCs, projectiles, predicted avatars, predicted
// spawns, lag-compensated hits) and the client (Bot: a replication client
// with an input.Player, scripted or controlled by a person through
// BotOptions.Control).
package game
