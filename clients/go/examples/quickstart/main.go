// Command quickstart is the Go client's quick start (README.md): a service that registers,
// checks its own port, watches its peers, takes numbers from a sequence, serves a task
// queue and submits a task to it, writes and reads a config document, and leaves.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"time"

	beacon "example.invalid/beacon/clients/go"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Every beacon of the cluster, or any of them (BEACON_ENDPOINTS, as nebcli reads it):
	// any beacon takes any call, and the client moves past one that is down or hung.
	endpoints := os.Getenv("BEACON_ENDPOINTS")
	if endpoints == "" {
		endpoints = "127.0.0.1:16000"
	}
	client, err := beacon.New(beacon.Config{Endpoints: strings.Split(endpoints, ",")})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// This service's own port: what it registers, and what others reach it at.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()

	// A node ID, unique while the lease holds, renewed in the background.
	reg, err := client.Register(ctx, "LOGIC", addr, beacon.RegisterOptions{
		OnLost: func(why string) { log.Printf("lease lost: stop using the node ID: %s", why) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close(ctx)
	fmt.Println("node id", reg.NodeID, "fencing token", reg.Token)

	// Its health, from a check beside it: while its port does not open it is critical, and
	// discovery, work assignment and task queues leave it out.
	if _, err := reg.RunChecks([]beacon.Check{beacon.TCPCheck{Addr: addr}}, time.Second, 3); err != nil {
		log.Fatal(err)
	}

	// Who else is alive: the current set, then each change once, across leader changes.
	peers, err := client.Watch(ctx, []string{"LOGIC"}, beacon.Serving)
	if err != nil {
		log.Fatal(err)
	}
	defer peers.Close()
	first, err := peers.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Kind, first.Node.NodeID, first.Node.Addr)

	// Numbers from a sequence (made once, usually by an operator), served from a local
	// double buffer of segments.
	if err := client.CreateSequence(ctx, "orders", 0, 0); err != nil && !errors.Is(err, beacon.ErrAlreadyExists) {
		log.Fatal(err)
	}
	orders, err := client.Sequence(ctx, "orders", beacon.SequenceOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer orders.Close(ctx)
	orderID, err := orders.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}

	// A worker of queue `thumbs` on this registration, and a task for it with its result.
	if err := client.CreateQueue(ctx, "thumbs", beacon.QueueOptions{}); err != nil {
		log.Fatal(err)
	}
	worker := client.Worker(reg, []string{"thumbs"}, 2, func(ctx context.Context, task *beacon.Task) ([]byte, error) {
		return []byte("thumbnail of " + string(task.GetPayload())), nil
	})
	defer worker.Stop()
	name := fmt.Sprintf("photo-%d", orderID)
	if _, err := client.Submit(ctx, "thumbs", name, []byte("photo-42.jpg"), beacon.SubmitOptions{}); err != nil {
		log.Fatal(err)
	}
	done, err := client.Wait(ctx, "thumbs", name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("task", done.GetName(), done.GetState(), string(done.GetResult()))

	// A config document every service of the cluster reads.
	rev, err := client.ConfigPut(ctx, "cluster/log_level", []byte("info"), beacon.PutOptions{})
	if err != nil {
		log.Fatal(err)
	}
	docs, err := client.ConfigGet(ctx, "cluster/log_level", false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("log_level", string(docs[0].GetValue()), "at revision", rev)
}
