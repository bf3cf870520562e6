#!/bin/bash
grep -cx willow /app/catalog.dat > /app/total.txt
