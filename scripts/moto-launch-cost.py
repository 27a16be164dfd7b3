#!/usr/bin/env python3
"""moto's own cost of the calls an EC2 glidein launch makes, without pondctl.

Starts moto's server, then for 200 glideins one after the other: the
lookup by tag before a launch (DescribeInstances filtered by pond:id),
six SecureString PutParameter (the credential one a file) and
RunInstances; at 10, 50, 100 and 200 instances it prints the time spent
in each so far and one listing of all of them by tag prefix and by
instance IDs. Needs moto[server] and boto3. See docs/performance.md.
"""
import boto3, time, subprocess, socket, sys, os
s=socket.socket(); s.bind(("127.0.0.1",0)); port=s.getsockname()[1]; s.close()
p=subprocess.Popen([sys.executable,"-m","moto.server","-H","127.0.0.1","-p",str(port)],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
ep=f"http://127.0.0.1:{port}"
os.environ.update(AWS_ACCESS_KEY_ID="t",AWS_SECRET_ACCESS_KEY="t")
import urllib.request
for _ in range(200):
    try: urllib.request.urlopen(ep+"/moto-api/"); break
    except Exception: time.sleep(0.05)
ec2=boto3.client("ec2",endpoint_url=ep,region_name="us-east-1"); ssm=boto3.client("ssm",endpoint_url=ep,region_name="us-east-1")
ami=ec2.describe_images()["Images"][0]["ImageId"]
try:
  T={"find":0,"put6":0,"run":0}; ids=[]
  for i in range(200):
    gid=f"g-x-{i:04d}"
    t=time.time(); ec2.describe_instances(Filters=[{"Name":"tag:pond:id","Values":[gid]}]); T["find"]+=time.time()-t
    t=time.time()
    for f in range(6): ssm.put_parameter(Name=f"/pond/{gid}/f{f}",Value="x"*1500,Type="SecureString",Overwrite=True)
    T["put6"]+=time.time()-t
    t=time.time()
    r=ec2.run_instances(ImageId=ami,InstanceType="t3.micro",MinCount=1,MaxCount=1,ClientToken=gid,UserData="x"*2000,
      TagSpecifications=[{"ResourceType":"instance","Tags":[{"Key":"pond:id","Value":gid}]+[{"Key":f"k{k}","Value":"v"} for k in range(5)]},{"ResourceType":"volume","Tags":[{"Key":"pond:id","Value":gid}]}])
    T["run"]+=time.time()-t; ids.append(r["Instances"][0]["InstanceId"])
    if i+1 in (10,50,100,200):
      t=time.time(); ec2.describe_instances(Filters=[{"Name":"tag:pond:id","Values":["g-x-*"]}]); lp=time.time()-t
      t=time.time(); ec2.describe_instances(InstanceIds=ids); li=time.time()-t
      print(i+1, {k:round(v,2) for k,v in T.items()}, "list-by-prefix %.3f by-ids %.3f"%(lp,li), flush=True)
finally: p.kill()
