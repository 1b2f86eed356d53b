// The dumbbell of examples/dumbbell.toml, in ns-3 3.44, as a reference for
// `sluice sim` (tools/ns3/compare.sh builds and runs it; see README.md,
// "Validation against ns-3").
//
//   sender --1 Gbit/s, 1 ms-- router --10 Mbit/s, 10 ms-- receiver
//
// What is set to match the sluice scenario (and Linux), and why:
// - Point-to-point devices with a device (NIC) queue of 1000 packets on the
//   1 Gbit/s link and of 1 packet on the 10 Mbit/s link (the scenario's
//   `buffer`): ns-3's device keeps one packet on the wire plus MaxSize
//   waiting, and stops the traffic-control layer while that queue is full,
//   exactly as sluice's port (one on the wire, a ring of N) does, so the
//   backlog builds in the queue disc.
// - Queue discs are installed on every device before addresses are assigned
//   (Ipv4AddressHelper::Assign would otherwise install its default, FqCoDel):
//   a 1000-packet FIFO everywhere (pfifo_fast with txqueuelen 1000 in
//   Linux; every packet here has TOS 0, so pfifo_fast's three bands are one
//   FIFO), and on the router's 10 Mbit/s device the variant under test.
// - TCP: TcpCubic with HyStart, SACK, timestamps and window scaling
//   (ns-3's defaults), segment size 1448 (ns-3's default is 536), initial
//   window 10, SO_SNDBUF/SO_RCVBUF as given (--buf), no ECN (the default of
//   both ns-3 and a Linux client). Three timers are set to Linux's values
//   instead of ns-3's, because ns-3's defaults differ from Linux's and one
//   combination of them is a trap:
//     MinRto 200 ms (TCP_RTO_MIN; ns-3: 1 s),
//     DelAckTimeout 40 ms (TCP_DELACK_MIN / TCP_ATO_MIN; ns-3: 200 ms),
//     TcpCubic::HyStartDelayMax 16 ms (tcp_cubic.c; ns-3: 1 s).
//   With MinRto 200 ms but ns-3's 200 ms delayed-ACK timer, a flow whose
//   window falls to one segment never leaves it: the receiver holds the
//   lone segment's ACK for 200 ms, the sender's RTO (also 200 ms) fires
//   first, and the timeout resets cwnd to one segment again (seen under
//   fq_codel: one flow got 0.17 Mbit/s with 173 timeouts). --minRto=1s
//   --delAck=200ms --hyStartDelayMax=1s restores ns-3's own values.
//   Everything else is ns-3's: its RTO is max(MinRto, SRTT + 4 RTTVAR)
//   where Linux's is SRTT + max(RTTVAR, 200 ms); PRR recovery; no RACK,
//   TLP, F-RTO or undo of spurious timeouts.
// - Ping: 56 data bytes every 100 ms from 1 s, the last sent before the end;
//   replies are counted for 10 s after it (as sluice does).
//
// Output: one JSON object on stdout: per-flow bytes delivered by the end,
// entries into fast recovery and into the Loss state (timeouts), ping RTTs,
// the bottleneck's drops and its backlog sampled every 10 ms.
// --traceFlow=N also prints flow N's segments, ACKs, cwnd, RTO, state
// changes and bottleneck drops, and every ping RTT, on stderr (how the
// findings in README.md's "Validation against ns-3" were traced).

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-apps-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

using namespace ns3;

namespace
{

std::vector<double> g_rtts_ms;         // one per echo reply
uint32_t g_ping_sent = 0;              // echo requests sent
std::vector<uint32_t> g_recoveries;    // per flow: entries into fast recovery
std::vector<uint32_t> g_rtos;          // per flow: entries into Loss (a timeout)
std::vector<uint64_t> g_bytes_at_end;  // per flow: bytes delivered by `duration`
uint64_t g_backlog_sum = 0;            // bottleneck qdisc backlog samples, packets
uint64_t g_backlog_samples = 0;
uint32_t g_backlog_max = 0;

int32_t g_trace_flow = -1; // --traceFlow: print this flow's events on stderr

void
PingRtt(uint16_t /*seq*/, Time rtt)
{
    g_rtts_ms.push_back(rtt.GetSeconds() * 1e3);
    if (g_trace_flow >= 0)
    {
        std::cerr << Simulator::Now().GetSeconds() << " ping rtt " << rtt.GetSeconds() * 1e3
                  << "\n";
    }
}

void
PingTx(uint16_t /*seq*/, Ptr<Packet> /*p*/)
{
    g_ping_sent++;
}

void
CongStateChange(uint32_t flow,
                TcpSocketState::TcpCongState_t old,
                TcpSocketState::TcpCongState_t now)
{
    if (int32_t(flow) == g_trace_flow)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow " << flow << " state "
                  << TcpSocketState::TcpCongStateName[old] << " -> "
                  << TcpSocketState::TcpCongStateName[now] << "\n";
    }
    if (now == TcpSocketState::CA_RECOVERY)
    {
        g_recoveries[flow]++;
    }
    else if (now == TcpSocketState::CA_LOSS)
    {
        g_rtos[flow]++;
    }
}

void
TraceValue(const char* what, uint32_t /*old*/, uint32_t now)
{
    std::cerr << Simulator::Now().GetSeconds() << " " << what << " " << now << "\n";
}

void
TraceTime(const char* what, Time /*old*/, Time now)
{
    std::cerr << Simulator::Now().GetSeconds() << " " << what << " " << now.GetMilliSeconds()
              << "ms\n";
}

void
TraceRetx(uint32_t flow,
          Ptr<const Packet> /*p*/,
          const TcpHeader& h,
          const Address& /*a*/,
          const Address& /*b*/,
          Ptr<const TcpSocketBase> /*s*/)
{
    std::cerr << Simulator::Now().GetSeconds() << " flow " << flow << " retransmits seq "
              << h.GetSequenceNumber() << "\n";
}

void
TraceTx(uint32_t flow, Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase> /*s*/)
{
    std::cerr << Simulator::Now().GetSeconds() << " flow " << flow << " tx seq "
              << h.GetSequenceNumber() << " len " << p->GetSize() << " ack "
              << h.GetAckNumber() << "\n";
}

void
TraceRx(uint32_t flow, Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase> /*s*/)
{
    std::cerr << Simulator::Now().GetSeconds() << " flow " << flow << " rx ack "
              << h.GetAckNumber() << " win " << h.GetWindowSize() << " len " << p->GetSize()
              << " sack " << (h.HasOption(TcpOption::SACK) ? "yes" : "no") << "\n";
}

// A bottleneck drop of the traced flow's data (its port is 5001 + flow).
void
TraceDrop(const char* when, Ptr<const QueueDiscItem> item)
{
    Ptr<Packet> p = item->GetPacket()->Copy();
    TcpHeader h;
    if (p->PeekHeader(h) && int32_t(h.GetDestinationPort()) == 5001 + g_trace_flow)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow " << g_trace_flow << " DROP " << when
                  << " seq " << h.GetSequenceNumber() << "\n";
    }
}

void
DropBefore(Ptr<const QueueDiscItem> item, const char* /*why*/)
{
    TraceDrop("before-enqueue", item);
}

void
DropAfter(Ptr<const QueueDiscItem> item, const char* /*why*/)
{
    TraceDrop("after-dequeue", item);
}

void
HookSocket(Ptr<BulkSendApplication> app, uint32_t flow)
{
    Ptr<Socket> s = app->GetSocket();
    if (!s)
    {
        Simulator::Schedule(MilliSeconds(1), &HookSocket, app, flow);
        return;
    }
    s->TraceConnectWithoutContext("CongState", MakeBoundCallback(&CongStateChange, flow));
    if (int32_t(flow) == g_trace_flow)
    {
        s->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&TraceValue, "cwnd"));
        s->TraceConnectWithoutContext("RTO", MakeBoundCallback(&TraceTime, "rto"));
        s->TraceConnectWithoutContext("Retransmission", MakeBoundCallback(&TraceRetx, flow));
        s->TraceConnectWithoutContext("Tx", MakeBoundCallback(&TraceTx, flow));
        s->TraceConnectWithoutContext("Rx", MakeBoundCallback(&TraceRx, flow));
    }
}

void
SampleBacklog(Ptr<QueueDisc> q, Time every, Time until)
{
    uint32_t n = q->GetNPackets();
    g_backlog_sum += n;
    g_backlog_samples++;
    g_backlog_max = std::max(g_backlog_max, n);
    if (Simulator::Now() + every < until)
    {
        Simulator::Schedule(every, &SampleBacklog, q, every, until);
    }
}

void
Snapshot(std::vector<Ptr<PacketSink>> sinks)
{
    for (size_t i = 0; i < sinks.size(); i++)
    {
        g_bytes_at_end[i] = sinks[i]->GetTotalRx();
    }
}

// Install `spec` as the root queue disc of `dev`.
Ptr<QueueDisc>
InstallQdisc(Ptr<NetDevice> dev, const std::string& spec)
{
    TrafficControlHelper tch;
    if (spec == "pfifo_fast")
    {
        // Linux: pfifo_fast, limit = txqueuelen = 1000 packets.
        tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("1000p"));
    }
    else if (spec == "pfifo_100")
    {
        tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("100p"));
    }
    else if (spec == "fq_codel")
    {
        // Linux's defaults: limit 10240p flows 1024 quantum 1514 (one full
        // Ethernet frame) target 5ms interval 100ms ecn drop_batch 64. ns-3
        // sets the quantum to the device MTU, 1500, one full IP packet (it
        // counts IP bytes where Linux counts frames).
        tch.SetRootQueueDisc("ns3::FqCoDelQueueDisc",
                             "MaxSize", StringValue("10240p"),
                             "Flows", UintegerValue(1024),
                             "Target", StringValue("5ms"),
                             "Interval", StringValue("100ms"),
                             "UseEcn", BooleanValue(true),
                             "DropBatchSize", UintegerValue(64));
    }
    else
    {
        NS_ABORT_MSG("unknown qdisc " << spec << " (pfifo_fast, pfifo_100, fq_codel)");
    }
    return tch.Install(dev).Get(0);
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string qdisc = "pfifo_fast";
    uint32_t flows = 4;
    uint32_t buf = 128 * 1024;
    double duration = 30.0;
    double stagger = 0.1;
    double pingStart = 1.0;
    double pingInterval = 0.1;
    uint32_t seed = 1;
    std::string minRto = "200ms";
    std::string delAck = "40ms";
    std::string hyStartDelayMax = "16ms";

    CommandLine cmd(__FILE__);
    cmd.AddValue("qdisc", "bottleneck qdisc: pfifo_fast | pfifo_100 | fq_codel", qdisc);
    cmd.AddValue("flows", "bulk TCP flows", flows);
    cmd.AddValue("buf", "SO_SNDBUF and SO_RCVBUF, bytes", buf);
    cmd.AddValue("duration", "seconds", duration);
    cmd.AddValue("stagger", "seconds between flow starts", stagger);
    cmd.AddValue("pingStart", "first ping, seconds", pingStart);
    cmd.AddValue("pingInterval", "seconds between pings", pingInterval);
    cmd.AddValue("seed", "RNG run number", seed);
    cmd.AddValue("minRto", "TcpSocketBase::MinRto (Linux: 200ms; ns-3's default: 1s)", minRto);
    cmd.AddValue("delAck",
                 "TcpSocket::DelAckTimeout (Linux: 40ms at first; ns-3's default: 200ms)",
                 delAck);
    cmd.AddValue("hyStartDelayMax",
                 "TcpCubic::HyStartDelayMax (Linux: 16ms; ns-3's default: 1s)",
                 hyStartDelayMax);
    cmd.AddValue("traceFlow", "print this flow's TCP events on stderr", g_trace_flow);
    cmd.Parse(argc, argv);
    RngSeedManager::SetRun(seed);

    // TCP, as Linux (and sluice's model) configures it.
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));
    // HyStart's delay threshold is clamp(min RTT / 8, 4 ms, 16 ms) in Linux
    // (tcp_cubic.c, HYSTART_DELAY_MAX); ns-3's upper clamp defaults to 1 s,
    // which lets a flow that joins a long queue slow-start much longer.
    Config::SetDefault("ns3::TcpCubic::HyStartDelayMax", TimeValue(Time(hyStartDelayMax)));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(buf));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(buf));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(Time(delAck)));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Time(minRto)));
    Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("Off"));

    NodeContainer nodes;
    nodes.Create(3);
    Ptr<Node> sender = nodes.Get(0);
    Ptr<Node> router = nodes.Get(1);
    Ptr<Node> receiver = nodes.Get(2);

    PointToPointHelper fast;
    fast.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    fast.SetChannelAttribute("Delay", StringValue("1ms"));
    fast.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1000p"));
    NetDeviceContainer d1 = fast.Install(sender, router);

    PointToPointHelper slow;
    slow.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
    slow.SetChannelAttribute("Delay", StringValue("10ms"));
    slow.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1p"));
    NetDeviceContainer d2 = slow.Install(router, receiver);

    InternetStackHelper stack;
    stack.Install(nodes);

    InstallQdisc(d1.Get(0), "pfifo_fast");
    InstallQdisc(d1.Get(1), "pfifo_fast");
    Ptr<QueueDisc> bottleneck = InstallQdisc(d2.Get(0), qdisc);
    InstallQdisc(d2.Get(1), "pfifo_fast");

    Ipv4AddressHelper addr;
    addr.SetBase("10.0.0.0", "255.255.255.0");
    addr.Assign(d1);
    addr.SetBase("10.0.1.0", "255.255.255.0");
    Ipv4InterfaceContainer i2 = addr.Assign(d2);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    Ipv4Address dst = i2.GetAddress(1);

    Time end = Seconds(duration);
    g_recoveries.assign(flows, 0);
    g_rtos.assign(flows, 0);
    g_bytes_at_end.assign(flows, 0);
    std::vector<Ptr<PacketSink>> sinks;
    for (uint32_t i = 0; i < flows; i++)
    {
        uint16_t port = 5001 + i;
        PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                    InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer s = sinkHelper.Install(receiver);
        s.Start(Seconds(0));
        sinks.push_back(DynamicCast<PacketSink>(s.Get(0)));

        BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(dst, port));
        bulk.SetAttribute("MaxBytes", UintegerValue(0));
        bulk.SetAttribute("SendSize", UintegerValue(1448));
        ApplicationContainer b = bulk.Install(sender);
        Time start = Seconds(i * stagger);
        b.Start(start);
        b.Stop(end);
        Simulator::Schedule(start + NanoSeconds(1),
                            &HookSocket,
                            DynamicCast<BulkSendApplication>(b.Get(0)),
                            i);
    }
    Simulator::Schedule(end, &Snapshot, sinks);

    // Pings at pingStart, +interval, ... while before the end, as sluice's.
    uint32_t count = 0;
    while (pingStart + count * pingInterval < duration - 1e-9)
    {
        count++;
    }
    PingHelper ping(dst);
    ping.SetAttribute("Interval", TimeValue(Seconds(pingInterval)));
    ping.SetAttribute("Size", UintegerValue(56));
    ping.SetAttribute("Count", UintegerValue(count));
    ping.SetAttribute("VerboseMode", EnumValue(Ping::VerboseMode::SILENT));
    ApplicationContainer p = ping.Install(sender);
    p.Start(Seconds(pingStart));
    p.Get(0)->TraceConnectWithoutContext("Rtt", MakeCallback(&PingRtt));
    p.Get(0)->TraceConnectWithoutContext("Tx", MakeCallback(&PingTx));

    if (g_trace_flow >= 0)
    {
        bottleneck->TraceConnectWithoutContext("DropBeforeEnqueue", MakeCallback(&DropBefore));
        bottleneck->TraceConnectWithoutContext("DropAfterDequeue", MakeCallback(&DropAfter));
    }
    Simulator::Schedule(Seconds(0), &SampleBacklog, bottleneck, MilliSeconds(10), end);

    Simulator::Stop(end + Seconds(10));
    Simulator::Run();

    const QueueDisc::Stats& st = bottleneck->GetStats();
    Ptr<PointToPointNetDevice> bdev = DynamicCast<PointToPointNetDevice>(d2.Get(0));
    uint32_t devDrops = bdev->GetQueue()->GetTotalDroppedPackets();

    std::vector<double> r = g_rtts_ms;
    std::sort(r.begin(), r.end());
    double avg = 0;
    for (double x : r)
    {
        avg += x;
    }
    avg = r.empty() ? 0 : avg / r.size();
    // The median as sluice computes it: the middle sample, or the mean of
    // the two middle ones.
    double median = 0;
    if (!r.empty())
    {
        size_t n = r.size();
        median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    }

    std::ostringstream o;
    o.precision(10);
    o << "{\"tool\":\"ns-3 " << "3.44" << "\",\"qdisc\":\"" << qdisc << "\",\"flows\":[";
    uint64_t total = 0;
    for (uint32_t i = 0; i < flows; i++)
    {
        total += g_bytes_at_end[i];
        o << (i ? "," : "") << "{\"bytes\":" << g_bytes_at_end[i]
          << ",\"recoveries\":" << g_recoveries[i] << ",\"rtos\":" << g_rtos[i] << "}";
    }
    o << "],\"total_bytes\":" << total << ",\"duration_s\":" << duration
      << ",\"ping\":{\"sent\":" << g_ping_sent << ",\"received\":" << r.size()
      << ",\"min_ms\":" << (r.empty() ? 0 : r.front()) << ",\"median_ms\":" << median
      << ",\"avg_ms\":" << avg << ",\"max_ms\":" << (r.empty() ? 0 : r.back()) << "}"
      << ",\"bottleneck\":{\"qdisc_dropped\":" << st.nTotalDroppedPackets
      << ",\"qdisc_dropped_before_enqueue\":" << st.nTotalDroppedPacketsBeforeEnqueue
      << ",\"qdisc_dropped_after_dequeue\":" << st.nTotalDroppedPacketsAfterDequeue
      << ",\"device_queue_dropped\":" << devDrops
      << ",\"backlog_avg_p\":"
      << (g_backlog_samples ? double(g_backlog_sum) / g_backlog_samples : 0.0)
      << ",\"backlog_max_p\":" << g_backlog_max << "}}";
    std::cout << o.str() << std::endl;

    Simulator::Destroy();
    return 0;
}
